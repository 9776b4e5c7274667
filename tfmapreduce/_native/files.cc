// tfmapreduce's native kernels, files family: mapped reads of rows, results written to shared memory (see tmr.h).
//
// Its ops:
//
// TmrReadRows(path: string, size: int64, offset: int64, count: int64) -> values: T[count]
//   `count` elements of type T stored at byte `offset` of file `path` (`size` bytes when the run started): with
//   map=true, of a local file at an offset TensorFlow's alignment allows, the file's own pages mapped read-only (no
//   copy; see `mapped` below for a file truncated meanwhile); else read through TensorFlow's file system straight
//   into the output tensor (one copy from the page cache, no string record, no decode).  A file of another size
//   fails, saying it no longer has the size it had.
//
// TmrWriteResult(path: string, value: T, offset: int64, total: int64)
//   Writes `value` (numbers of any type that copies as bytes, rank 1 to 6) into the existing file `path` (the
//   client's shared-memory file of a returned result: _io/shm.py's Staging.returned) as raw bytes after a header, so the
//   client maps them (_io/shm.py's read_returned) with no TensorProto made on either side.  A result made in `parts`
//   parts on several devices goes into one file: part `part` (of rows value.dim(0)) at rows [offset, offset +
//   rows) of the `total`, so that the client maps the parts' concatenation without copying them together.  Every
//   part sizes the file and writes the same header; the parts write disjoint bytes, in any order.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <list>
#include <mutex>
#include <unordered_map>

#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tmr.h"

namespace tfmapreduce {

// Mapped rows: a batch that is its file's own pages, mapped read-only (no copy out of the page cache).
//
// A file truncated while mapped makes the pages it lost fault with SIGBUS, which would kill the worker.  The
// handler below maps a page of zeros over each such page of a batch's mapping instead and lets the batch go on:
// the run then fails at its check of the file's size (TmrReadRows with count 0 after the run: _io/mapped.py's size_checks),
// which names the file, as a read does.  A fault anywhere else goes to the handler there was before.
namespace mapped {

constexpr int kSlots = 4096;  // windows mapped at once in a process, at most (more are read instead)
constexpr uintptr_t kClaimed = 1;  // a slot's begin while it is being filled (0: free)
std::atomic<uintptr_t> g_begin[kSlots];
std::atomic<uintptr_t> g_end[kSlots];
std::atomic<int> g_lost[kSlots];  // a page of the slot's window was lost: never take the window again
struct sigaction g_previous;
uintptr_t g_page = 4096;

void OnBusError(int signal, siginfo_t* info, void* context) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code > 0) {  // a fault, not a signal sent
    for (int i = 0; i < kSlots; ++i) {
      const uintptr_t begin = g_begin[i].load(std::memory_order_acquire);
      if (begin <= kClaimed || at < begin || at >= g_end[i].load(std::memory_order_acquire)) continue;
      void* page = reinterpret_cast<void*>(at & ~(g_page - 1));
      if (mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
        g_lost[i].store(1, std::memory_order_release);
        return;
      }
    }
  }
  sigaction(SIGBUS, &g_previous, nullptr);  // not ours: as if this handler had never been installed
  if (info->si_code <= 0) raise(signal);    // a fault instead runs again, into the previous handler
}

// Whether the handler is in place (installed by the first mapping of the process).
bool Installed() {
  static const bool installed = [] {
    g_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction action = {};
    action.sa_sigaction = OnBusError;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGBUS, &action, &g_previous) == 0;
  }();
  return installed;
}

// The slot the handler knows [begin, end) by, or -1 where every slot is taken.
int Remember(uintptr_t begin, uintptr_t end) {
  static std::atomic<int> next{0};
  for (int tries = 0; tries < kSlots; ++tries) {
    const int i = next.fetch_add(1, std::memory_order_relaxed) % kSlots;
    uintptr_t free = 0;
    if (!g_begin[i].compare_exchange_strong(free, kClaimed, std::memory_order_acq_rel)) continue;
    g_end[i].store(end, std::memory_order_release);
    g_lost[i].store(0, std::memory_order_release);
    g_begin[i].store(begin, std::memory_order_release);
    return i;
  }
  return -1;
}

// One mapped window of a file, unmapped (and forgotten by the handler) when the last batch and the cache let go.
struct Window {
  Window(char* base, size_t length, int slot, const struct stat& st) : base(base), length(length), slot(slot), st(st) {}
  ~Window() {
    g_begin[slot].store(0, std::memory_order_release);
    munmap(base, length);
  }
  bool Same(const struct stat& now) const {  // the file it maps is still the one it was, whole
    return now.st_dev == st.st_dev && now.st_ino == st.st_ino && now.st_size == st.st_size &&
           now.st_mtim.tv_sec == st.st_mtim.tv_sec && now.st_mtim.tv_nsec == st.st_mtim.tv_nsec &&
           g_lost[slot].load(std::memory_order_acquire) == 0;
  }
  char* const base;
  const size_t length;
  const int slot;
  const struct stat st;
};

// The windows mapped last, kept mapped between runs up to kKept bytes (least recently used first out): a rerun over
// the same files maps nothing, where populating a window's page table costs about 45 ms a GiB here.  A window is
// taken again only while its file is the same (device, inode, size, modification time) and lost no page.
class Kept {
 public:
  static Kept& Get() {
    static Kept* kept = new Kept;  // never destroyed: batches may outlive static destruction
    return *kept;
  }

  std::shared_ptr<Window> Find(const std::string& key, const struct stat& st) {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = index_.find(key);
    if (found == index_.end()) return nullptr;
    std::shared_ptr<Window> window = found->second->second;
    Drop(found);
    if (!window->Same(st)) return nullptr;
    Keep(key, window);
    return window;
  }

  void Add(const std::string& key, std::shared_ptr<Window> window) {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = index_.find(key);
    if (found != index_.end()) Drop(found);
    if (window->length > kKept) return;
    while (bytes_ + window->length > kKept) Drop(index_.find(order_.back().first));
    Keep(key, std::move(window));
  }

 private:
  using Order = std::list<std::pair<std::string, std::shared_ptr<Window>>>;
  static constexpr size_t kKept = size_t{256} << 20;

  void Keep(const std::string& key, std::shared_ptr<Window> window) {
    bytes_ += window->length;
    order_.emplace_front(key, std::move(window));
    index_[key] = order_.begin();
  }
  void Drop(std::unordered_map<std::string, Order::iterator>::iterator found) {
    bytes_ -= found->second->second->length;
    order_.erase(found->second);
    index_.erase(found);
  }

  std::mutex mu_;
  Order order_;
  std::unordered_map<std::string, Order::iterator> index_;
  size_t bytes_ = 0;
};

class Rows : public ::tensorflow::TensorBuffer {
 public:
  Rows(std::shared_ptr<Window> window, size_t skip, size_t bytes)
      : TensorBuffer(window->base + skip), window_(std::move(window)), bytes_(bytes) {}
  size_t size() const override { return bytes_; }
  TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(::tensorflow::AllocationDescription* proto) const override {
    proto->set_requested_bytes(static_cast<int64_t>(bytes_));
    proto->set_allocator_name("tfmapreduce_mapped_file");
  }
  bool OwnsMemory() const override { return false; }  // the file's pages: never written in place

 private:
  const std::shared_ptr<Window> window_;
  const size_t bytes_;
};

// `count` elements (`n` bytes) at `offset` of the local file `path` (of `size` bytes) as the file's own pages, in
// `out`; Unavailable where they cannot be mapped (another file system, no slot, no handler): read them instead.
absl::Status Map(const std::string& path, int64_t size, int64_t offset, int64_t n, ::tensorflow::DataType dtype,
                 int64_t count, Tensor* out) {
  if (path.find("://") != std::string::npos || !Installed()) return ::tensorflow::errors::Unavailable("not mapped");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ::tensorflow::errors::Unavailable("not mapped");
  struct stat st = {};
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (regular && st.st_size != size) {
    close(fd);
    return Resized(path, size);
  }
  const int64_t from = offset & ~static_cast<int64_t>(g_page - 1);
  const size_t length = static_cast<size_t>(offset + n - from);
  const std::string key = absl::StrCat(path, "\n", from, "\n", length);
  std::shared_ptr<Window> window = regular ? Kept::Get().Find(key, st) : nullptr;
  if (window == nullptr && regular) {
    void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, from);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(base);
    const int slot = base == MAP_FAILED ? -1 : Remember(begin, begin + length);
    if (slot >= 0) {
      window = std::make_shared<Window>(static_cast<char*>(base), length, slot, st);
      Kept::Get().Add(key, window);
    } else if (base != MAP_FAILED) {
      munmap(base, length);
    }
  }
  close(fd);
  if (window == nullptr) return ::tensorflow::errors::Unavailable("not mapped");
  Rows* rows = new Rows(std::move(window), static_cast<size_t>(offset - from), static_cast<size_t>(n));
  *out = Tensor(dtype, ::tensorflow::TensorShape({count}), rows);
  rows->Unref();  // the tensor holds it now
  return absl::OkStatus();
}

}  // namespace mapped

REGISTER_OP("TmrReadRows")
    .Input("path: string")
    .Input("size: int64")
    .Input("offset: int64")
    .Input("count: int64")
    .Output("values: T")
    .Attr("map: bool = true")
    .Attr("T: {bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, half, bfloat16, float, double, complex64, complex128}")
    .SetIsStateful()  // it reads a file: never folded, never cached
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

class ReadRowsOp : public OpKernel {
 public:
  explicit ReadRowsOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("map", &map_));
  }

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<tstring>()());
    const int64_t size = context->input(1).scalar<int64_t>()();
    const int64_t offset = context->input(2).scalar<int64_t>()();
    const int64_t count = context->input(3).scalar<int64_t>()();
    const ::tensorflow::DataType dtype = context->expected_output_dtype(0);
    const int64_t n = count * ::tensorflow::DataTypeSize(dtype);
    OP_REQUIRES(context, count >= 0 && offset >= 0 && offset + n <= size,
                ::tensorflow::errors::InvalidArgument("bad byte range"));
    if (map_ && n > 0 && offset % kAligned == 0) {
      Tensor pages;
      const absl::Status status = mapped::Map(path, size, offset, n, dtype, count, &pages);
      if (status.ok()) return context->set_output(0, pages);
      OP_REQUIRES(context, absl::IsUnavailable(status), status);
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({count}), &out));
    uint64_t now = 0;
    OP_REQUIRES_OK(context, context->env()->GetFileSize(path, &now));
    OP_REQUIRES(context, static_cast<int64_t>(now) == size, Resized(path, size));
    if (n == 0) return;
    std::unique_ptr<::tensorflow::RandomAccessFile> file;
    OP_REQUIRES_OK(context, context->env()->NewRandomAccessFile(path, &file));
    OP_REQUIRES_OK(context, ReadExactly(*file, path, offset, n, size, const_cast<char*>(out->tensor_data().data())));
  }

 private:
  static constexpr int64_t kAligned = 64;  // a mapped batch starts where an allocated tensor would: TensorFlow's alignment
  bool map_ = true;
};

REGISTER_KERNEL_BUILDER(Name("TmrReadRows").Device(::tensorflow::DEVICE_CPU), ReadRowsOp);

REGISTER_OP("TmrWriteResult")
    .Input("path: string")
    .Input("value: T")
    .Input("offset: int64")
    .Input("total: int64")
    .Attr("T: type")
    .Attr("part: int = 0")
    .Attr("parts: int = 1")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs);

// The file: a 128-byte header (the magic, the dtype, rank and parts (int32 each), 4 spare bytes, then up to 6
// dimensions (int64) with `total` rows), each part's rows (int64, padded to 64 bytes), then the values.
constexpr char kResultMagic[8] = {'T', 'M', 'R', 'R', 'E', 'S', '2', '\0'};
constexpr int64_t kResultHeader = 128;
constexpr int kResultRanks = 6;

class WriteResultOp : public OpKernel {
 public:
  explicit WriteResultOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("part", &part_));
    OP_REQUIRES_OK(context, context->GetAttr("parts", &parts_));
    OP_REQUIRES(context, parts_ >= 1 && part_ >= 0 && part_ < parts_,
                ::tensorflow::errors::InvalidArgument("part must be in [0, parts)"));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& path_in = context->input(0);
    const Tensor& value = context->input(1);
    OP_REQUIRES(context, path_in.dims() == 0, ::tensorflow::errors::InvalidArgument("path must be a scalar"));
    OP_REQUIRES(context, ::tensorflow::DataTypeCanUseMemcpy(value.dtype()),
                ::tensorflow::errors::Unimplemented("TmrWriteResult writes numbers, not ",
                                                    ::tensorflow::DataTypeString(value.dtype())));
    OP_REQUIRES(context, value.dims() >= 1 && value.dims() <= kResultRanks,
                ::tensorflow::errors::Unimplemented("TmrWriteResult writes 1 to ", kResultRanks, " dimensions"));
    const int64_t offset = context->input(2).scalar<int64_t>()();
    const int64_t total = context->input(3).scalar<int64_t>()();
    const int64_t rows = value.dim_size(0);
    OP_REQUIRES(context, offset >= 0 && rows <= total - offset,
                ::tensorflow::errors::InvalidArgument("part ", part_, "'s rows [", offset, ", ", offset + rows,
                                                      ") are not within the result's ", total, " rows"));
    int64_t row_bytes = ::tensorflow::DataTypeSize(value.dtype());
    for (int d = 1; d < value.dims(); ++d) row_bytes *= value.dim_size(d);
    char header[kResultHeader] = {};
    std::memcpy(header, kResultMagic, sizeof(kResultMagic));
    const int32_t fields[3] = {value.dtype(), value.dims(), static_cast<int32_t>(parts_)};
    std::memcpy(header + 8, fields, sizeof(fields));
    for (int d = 0; d < value.dims(); ++d) {
      const int64_t size = d == 0 ? total : value.dim_size(d);
      std::memcpy(header + 24 + 8 * d, &size, 8);
    }
    const int64_t table = (parts_ * 8 + 63) / 64 * 64;
    const int64_t data_at = kResultHeader + table + offset * row_bytes;
    const std::string path(path_in.scalar<tstring>()());
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    OP_REQUIRES(context, fd >= 0,
                ::tensorflow::errors::Unavailable("cannot open the result file ", path, ": ", std::strerror(errno)));
    const absl::string_view data = value.tensor_data();
    const struct {
      const char* at;
      int64_t size;
      int64_t to;
    } pieces[3] = {{header, kResultHeader, 0},
                   {reinterpret_cast<const char*>(&rows), 8, kResultHeader + 8 * part_},
                   {data.data(), static_cast<int64_t>(data.size()), data_at}};
    int error = ftruncate(fd, kResultHeader + table + total * row_bytes) == 0 ? 0 : errno;
    for (const auto& piece : pieces) {
      for (int64_t done = 0; error == 0 && done < piece.size;) {
        const ssize_t wrote = pwrite(fd, piece.at + done, piece.size - done, piece.to + done);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) error = wrote < 0 ? errno : EIO;
        if (wrote > 0) done += wrote;
      }
    }
    if (close(fd) != 0 && error == 0) error = errno;
    OP_REQUIRES(context, error == 0,
                ::tensorflow::errors::Unavailable("cannot write the result file ", path, ": ", std::strerror(error)));
  }

 private:
  int64_t part_ = 0;
  int64_t parts_ = 1;
};

REGISTER_KERNEL_BUILDER(Name("TmrWriteResult").Device(::tensorflow::DEVICE_CPU), WriteResultOp);

}  // namespace tfmapreduce
