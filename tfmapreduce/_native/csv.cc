// tfmapreduce's native kernels, CSV family: CSV lines parsed as numbers (see tmr.h).
//
// Its ops:
//
// TmrDecodeCsv(records: string[m]) -> values: out_types (one tensor per selected field, a row per line)
//   The lines of `records` (each element one line, or several joined by \n: a block of whole lines) parsed as CSV
//   of `fields` fields split on `delimiter` (a field may be quoted, "" a quote inside), and the fields `columns`
//   parsed as numbers of `out_types` (float, double, int32, int64; surrounding spaces allowed, as
//   tf.io.decode_csv allows).  A line with another number of fields, an empty selected field or one that is not a
//   number fails with tf.io.decode_csv's words and the line's index among all the lines ("in record N").
//
// TmrReadCsv(path: string, size: int64, start: int64, stop: int64) -> values: out_types
//   The lines of a CSV file that start in bytes [start, stop) (Hadoop's split rule), read by the kernel itself (no string per
//   line, no tf.data text pipeline) and parsed as TmrDecodeCsv parses them; a bad line's error gives its line
//   number in the file and its bytes (see ReadCsvOp).  With matrix=true, out_types is one type, every column's,
//   and the one output is the [rows, len(columns)] matrix of them (no stack of the columns afterwards).

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "tmr.h"

namespace tfmapreduce {

REGISTER_OP("TmrDecodeCsv")
    .Input("records: string")
    .Output("values: out_types")
    .Attr("out_types: list({float, double, int32, int64}) >= 0")
    .Attr("columns: list(int) >= 0")
    .Attr("fields: int >= 1")
    .Attr("delimiter: string = ','")
    .SetShapeFn(VectorOutputs);

// A field's text without the spaces around it; false where it is not a whole number of type T.  Floats that
// std::from_chars does not take whole (hexadecimal, out of range) go through strtod, as tf.io.decode_csv's do.
template <typename T>
bool ParseNumber(absl::string_view text, T* out) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (ec == std::errc() && ptr == end) return true;
  if constexpr (std::is_floating_point_v<T>) {
    const std::string copy(text);
    char* stop = nullptr;
    const T value = std::is_same_v<T, float> ? std::strtof(copy.c_str(), &stop) : std::strtod(copy.c_str(), &stop);
    if (stop == copy.c_str() + copy.size()) {
      *out = value;
      return true;
    }
  }
  return false;
}

// The exact powers of ten a double holds (10^22 is the last: 5^22 < 2^53).
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
constexpr uint64_t kTens[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

// The run of decimal digits at p, at most 8 and none at or past `e`: their count into *count, their value
// returned.  8 bytes at p are read (all readable: the caller's promise) and looked at in one word: a byte is a
// digit where its high nibble is 3 and stays 3 with 6 added (carries only reach bytes after the first non-digit);
// the digits, shifted to the word's top (zeros before them), make one number by three multiplications.
inline uint64_t EightDigits(const char* p, const char* e, int* count) {
  uint64_t word;
  std::memcpy(&word, p, 8);
  constexpr uint64_t kHigh = 0xF0F0F0F0F0F0F0F0ULL, kThrees = 0x3030303030303030ULL;
  const uint64_t other = ((word & kHigh) ^ kThrees) | (((word + 0x0606060606060606ULL) & kHigh) ^ kThrees);
  int n = other == 0 ? 8 : __builtin_ctzll(other) >> 3;  // little-endian: the first byte is the lowest
  if (e - p < n) n = static_cast<int>(e - p);
  *count = n;
  if (n == 0) return 0;
  uint64_t value = (word - kThrees) << (8 * (8 - n));
  value = value * 10 + (value >> 8);
  value = (((value & 0x000000FF000000FFULL) * 0x000F424000000064ULL) +
           (((value >> 16) & 0x000000FF000000FFULL) * 0x0000271000000001ULL)) >>
          32;
  return value;
}

// The digits at p (before e) into m (wrapping past 19 digits: the caller counts them), their count added to
// *digits; 8 at a time where bytes up to `readable` allow.
inline const char* Digits(const char* p, const char* e, const char* readable, uint64_t* m, int* digits) {
  while (readable - p >= 8) {
    int n;
    const uint64_t value = EightDigits(p, e, &n);
    if (n == 0) return p;
    *m = *m * kTens[n] + value;
    *digits += n;
    p += n;
    if (n < 8) return p;
  }
  while (p < e && static_cast<unsigned char>(*p - '0') < 10) {
    *m = *m * 10 + static_cast<unsigned>(*p - '0');
    ++*digits;
    ++p;
  }
  return p;
}

// The plain decimal number at p, before e (`-`? digits, `.`, digits, an exponent; a leading `+` as ParseNumber drops
// it) parsed by hand where the result is provably the correctly rounded one, as std::from_chars gives: where it
// stops returned (the field is [p, that) where that is e or a delimiter), nullptr (nothing decided) for anything
// else (long mantissas, large exponents, inf, nan, hex, no digit), which ParseNumber then takes (spaces too: they
// stop the number, so the field is not [p, stop)).  Bytes up to `readable` (>= e) may be read.  Floats: a mantissa m of at most 19 digits (leading zeros counted)
// with m <= 2^53 and a power of ten 10^k with |k| <= 22 make m * 10^k (or m / 10^-k) one correctly rounded double
// operation of exact operands (Clinger's fast path).  A float is that double rounded again, which is the float
// nearest the decimal unless the double lies exactly halfway between two floats (then false: the decimal may lie
// on either side); every such value is a normal float (1e-22 .. 9.1e37).  Integers: at most 18 digits, then the range of T.
template <typename T>
__attribute__((always_inline)) inline const char* FastNumber(const char* p, const char* e, const char* readable, T* out) {
  if (p < e && *p == '+') ++p;
  const bool negative = p < e && *p == '-';
  p += negative;
  uint64_t m = 0;
  int digits = 0;
  const char* const first = p;
  p = Digits(p, e, readable, &m, &digits);
  if constexpr (std::is_integral_v<T>) {
    if (p == first || digits > 18) return nullptr;
    const int64_t value = negative ? -static_cast<int64_t>(m) : static_cast<int64_t>(m);
    if (value < std::numeric_limits<T>::min() || value > std::numeric_limits<T>::max()) return nullptr;
    *out = static_cast<T>(value);
    return p;
  } else {
    int exponent = 0;  // the power of ten of m's last digit
    if (p < e && *p == '.') {
      const char* const point = ++p;
      p = Digits(p, e, readable, &m, &digits);
      exponent = -static_cast<int>(p - point);
    }
    if (digits == 0 || digits > 19) return nullptr;
    if (p < e && (*p == 'e' || *p == 'E')) {
      ++p;
      bool minus = false;
      if (p < e && (*p == '+' || *p == '-')) minus = *p++ == '-';
      const char* const start = p;
      int power = 0;
      while (p < e && static_cast<unsigned char>(*p - '0') < 10) {
        power = power * 10 + (*p - '0');
        if (++p - start > 4) return nullptr;
      }
      if (p == start) return nullptr;
      exponent += minus ? -power : power;
    }
    double value;
    if (m == 0) {
      value = 0.0;
    } else {
      if (m > (uint64_t{1} << 53) || exponent < -22 || exponent > 22) return nullptr;
      value = exponent < 0 ? static_cast<double>(m) / kPow10[-exponent] : static_cast<double>(m) * kPow10[exponent];
    }
    if (negative) value = -value;
    if constexpr (std::is_same_v<T, float>) {
      uint64_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      if ((bits & 0x1FFFFFFFu) == 0x10000000u) return nullptr;  // halfway between two floats
    }
    *out = static_cast<T>(value);
    return p;
  }
}

// A field's number: FastNumber where it decides, else ParseNumber (the same result, or false where not a number).
template <typename T>
inline bool ParseField(const char* p, const char* e, const char* readable, T* out) {
  return FastNumber(p, e, readable, out) == e || ParseNumber(absl::string_view(p, static_cast<size_t>(e - p)), out);
}

// The bytes equal to c in [p, e), 8 at a time: in x = word ^ c repeated, a byte's high bit is set in
// ~(((x & 0x7F..) + 0x7F..) | x | 0x7F..) exactly where the byte is 0 (no carry crosses bytes); no popcount
// instruction (the library is built for any x86-64).
inline int64_t CountByte(const char* p, const char* e, char c) {
  constexpr uint64_t kLow = 0x7F7F7F7F7F7F7F7FULL;
  const uint64_t pattern = 0x0101010101010101ULL * static_cast<unsigned char>(c);
  int64_t count = 0;
  for (; e - p >= 8; p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    const uint64_t x = word ^ pattern;
    const uint64_t ones = ~(((x & kLow) + kLow) | x | kLow) >> 7;  // 1 in each such byte
    count += static_cast<int64_t>((ones * 0x0101010101010101ULL) >> 56);  // their sum in the top byte
  }
  for (; p < e; ++p) count += *p == c;
  return count;
}

// The CSV rows of TmrDecodeCsv and TmrReadCsv: each line's fields split (a field may be quoted, "" a quote inside) and
// the selected ones parsed as numbers into their output columns.
class CsvRows {
 public:
  // With `matrix`, out_types has one type, every column's, and the rows go to one [rows, columns] output.
  CsvRows(OpKernelConstruction* context, bool matrix) : matrix_(matrix) {
    OP_REQUIRES_OK(context, context->GetAttr("out_types", &types_));
    std::vector<int> columns;
    OP_REQUIRES_OK(context, context->GetAttr("columns", &columns));
    if (matrix_) {
      OP_REQUIRES(context, types_.size() == 1, ::tensorflow::errors::InvalidArgument("matrix: one out_type"));
      types_.assign(columns.size(), types_[0]);
      stride_ = static_cast<int64_t>(columns.size());
    }
    OP_REQUIRES_OK(context, context->GetAttr("fields", &fields_));
    std::string delimiter;
    OP_REQUIRES_OK(context, context->GetAttr("delimiter", &delimiter));
    OP_REQUIRES(context, delimiter.size() == 1, ::tensorflow::errors::InvalidArgument("delimiter must be one byte"));
    OP_REQUIRES(context, columns.size() == types_.size(),
                ::tensorflow::errors::InvalidArgument("one out_type per column"));
    delimiter_ = delimiter[0];
    greedy_ = absl::string_view("0123456789.eE+-").find(delimiter_) == absl::string_view::npos;
    slot_.assign(fields_, -1);
    for (size_t j = 0; j < columns.size(); ++j) {
      OP_REQUIRES(context, columns[j] >= 0 && columns[j] < fields_, ::tensorflow::errors::InvalidArgument("bad column"));
      slot_[columns[j]] = static_cast<int>(j);
    }
  }

  // The output columns of `n` rows, allocated.
  absl::Status Allocate(OpKernelContext* context, int64_t n, std::vector<void*>* out) const {
    out->assign(types_.size(), nullptr);
    if (matrix_) {  // column j from element j of row 0
      Tensor* t = nullptr;
      TF_RETURN_IF_ERROR(context->allocate_output(0, TensorShape({n, stride_}), &t));
      const size_t size = ::tensorflow::DataTypeSize(t->dtype());
      for (size_t j = 0; j < types_.size(); ++j) (*out)[j] = static_cast<char*>(t->data()) + j * size;
      return absl::OkStatus();
    }
    for (size_t j = 0; j < types_.size(); ++j) {
      Tensor* t = nullptr;
      TF_RETURN_IF_ERROR(context->allocate_output(static_cast<int>(j), TensorShape({n}), &t));
      (*out)[j] = t->data();
    }
    return absl::OkStatus();
  }

  // A line's fields, split first (the field count is checked before a number), and the text of its quoted fields (a
  // deque: their views stay valid).  One per Compute call: a kernel may run in several threads at once.
  struct Scratch {
    std::vector<absl::string_view> values;
    std::deque<std::string> unquoted;
  };

  // Row r of the outputs from `line`; an error names the row with `where` (tf.io.decode_csv's words).
  absl::Status Parse(absl::string_view line, int64_t r, const std::string& where, const std::vector<void*>& out,
                     Scratch& scratch) const {
    std::vector<absl::string_view>& values = scratch.values;
    std::deque<std::string>& unquoted = scratch.unquoted;
    values.clear();
    unquoted.clear();
    size_t at = 0;
    while (true) {  // one field a turn, from `at`
      size_t next;
      if (at < line.size() && line[at] == '"') {  // quoted: up to the lone closing quote, "" a quote
        std::string text;
        size_t i = at + 1;
        bool closed = false;
        while (i < line.size()) {
          if (line[i] == '"') {
            if (i + 1 < line.size() && line[i + 1] == '"') {
              text.push_back('"');
              i += 2;
              continue;
            }
            closed = true;
            ++i;
            break;
          }
          text.push_back(line[i++]);
        }
        if (!(closed && (i == line.size() || line[i] == delimiter_))) {
          return ::tensorflow::errors::InvalidArgument("Quote inside a string has to be escaped by another quote", where);
        }
        unquoted.push_back(std::move(text));
        values.push_back(absl::string_view(unquoted.back()));
        next = i;
      } else {
        const size_t end = line.find(delimiter_, at);
        next = end == absl::string_view::npos ? line.size() : end;
        values.push_back(line.substr(at, next - at));
      }
      if (next >= line.size()) break;
      at = next + 1;
    }
    const int have = static_cast<int>(values.size());
    if (have != fields_) {
      return ::tensorflow::errors::InvalidArgument("Expect ", fields_, " fields but have ", have, where);
    }
    for (int field = 0; field < fields_; ++field) {
      const int j = slot_[field];
      if (j < 0) continue;
      const absl::string_view value = values[field];
      if (value.empty()) {
        return ::tensorflow::errors::InvalidArgument("Field ", field, " is required but missing", where, "!");
      }
      if (!Store(value.data(), value.data() + value.size(), value.data() + value.size(), j, r, out)) {
        return ::tensorflow::errors::InvalidArgument("Field ", field, where, " is not a valid ",
                                                     ::tensorflow::DataTypeString(types_[j]), ": ", value);
      }
    }
    return absl::OkStatus();
  }

  // Row r of the outputs from `line` where it is plain: no quote, no \r, `fields` fields, every selected one a
  // number; false (row r's values undecided) for anything else, which Parse then takes, as it takes every line.  The
  // fields are split by a scan of 8 bytes at a time for the delimiter, a quote or a \r, and bytes up to `readable`
  // (>= the line's end) may be read.
  bool ParsePlain(absl::string_view line, const char* readable, int64_t r, const std::vector<void*>& out) const {
    constexpr uint64_t kOnes = 0x0101010101010101ULL;
    constexpr uint64_t kHighs = 0x8080808080808080ULL;
    const uint64_t delimiters = kOnes * static_cast<unsigned char>(delimiter_);
    const uint64_t quotes = kOnes * static_cast<unsigned char>('"');
    const uint64_t returns = kOnes * static_cast<unsigned char>('\r');
    const char* const end = line.data() + line.size();
    const char* at = line.data();  // the field's first byte
    for (int field = 0;; ++field) {
      if (field >= fields_) return false;
      const int j = slot_[field];
      const char* q = at;  // on to the field's delimiter, a quote or a \r, or the line's end
      if (j >= 0 && greedy_) {  // the number first: where it stops at a delimiter or the end, that is the field
        const char* stop = Number(at, end, readable, j, r, out);
        if (stop != nullptr && (stop == end || *stop == delimiter_)) {
          q = stop;
          goto next;
        }
      }
      while (end - q >= 8) {
        uint64_t word;
        std::memcpy(&word, q, 8);
        const uint64_t a = word ^ delimiters, b = word ^ quotes, c = word ^ returns;
        // A byte of 0x80 where a, b or c has a zero byte (exact for the lowest such byte).
        const uint64_t hits = ((a - kOnes) & ~a) | ((b - kOnes) & ~b) | ((c - kOnes) & ~c);
        const uint64_t found = hits & kHighs;
        if (found != 0) {
          q += __builtin_ctzll(found) >> 3;  // little-endian: the lowest byte is the first
          goto stop;
        }
        q += 8;
      }
      while (q < end && *q != delimiter_ && *q != '"' && *q != '\r') ++q;
    stop:
      if (q < end && *q != delimiter_) return false;  // a quote or a \r
      if (j >= 0 && !Store(at, q, readable, j, r, out)) return false;
    next:
      if (q == end) return field + 1 == fields_;
      at = q + 1;
    }
  }

 private:
  // Field text [p, e) as a number of column j's type into row r of out[j]; false where it is not one.  Bytes up to
  // `readable` (>= e) may be read.
  bool Store(const char* p, const char* e, const char* readable, int j, int64_t r,
             const std::vector<void*>& out) const {
    const int64_t at = r * stride_;
    switch (types_[j]) {
      case ::tensorflow::DT_FLOAT: return ParseField(p, e, readable, static_cast<float*>(out[j]) + at);
      case ::tensorflow::DT_DOUBLE: return ParseField(p, e, readable, static_cast<double*>(out[j]) + at);
      case ::tensorflow::DT_INT32: return ParseField(p, e, readable, static_cast<int32_t*>(out[j]) + at);
      default: return ParseField(p, e, readable, static_cast<int64_t*>(out[j]) + at);
    }
  }

  // The number at p (before e) of column j's type into row r of out[j], by FastNumber alone: where it stops, or nullptr.
  const char* Number(const char* p, const char* e, const char* readable, int j, int64_t r,
                     const std::vector<void*>& out) const {
    const int64_t at = r * stride_;
    switch (types_[j]) {
      case ::tensorflow::DT_FLOAT: return FastNumber(p, e, readable, static_cast<float*>(out[j]) + at);
      case ::tensorflow::DT_DOUBLE: return FastNumber(p, e, readable, static_cast<double*>(out[j]) + at);
      case ::tensorflow::DT_INT32: return FastNumber(p, e, readable, static_cast<int32_t*>(out[j]) + at);
      default: return FastNumber(p, e, readable, static_cast<int64_t*>(out[j]) + at);
    }
  }

  std::vector<::tensorflow::DataType> types_;
  std::vector<int> slot_;
  int fields_ = 1;
  char delimiter_ = ',';
  int64_t stride_ = 1;  // elements from a column's row to its next: 1, or k in a [rows, k] matrix
  bool matrix_ = false;
  bool greedy_ = true;  // the delimiter is no byte of a number (digits . e E + -): a number's end may end its field
};

class DecodeCsvOp : public OpKernel {
 public:
  explicit DecodeCsvOp(OpKernelConstruction* context) : OpKernel(context), rows_(context, false) {}

  void Compute(OpKernelContext* context) override {
    const auto records = context->input(0).flat<tstring>();
    std::vector<absl::string_view> lines;
    std::vector<const char*> ends;  // each line's record's end: bytes ParsePlain may read
    for (int64_t i = 0; i < records.size(); ++i) {
      absl::string_view text(records(i).data(), records(i).size());
      size_t from = 0;
      while (true) {
        const size_t at = text.find('\n', from);
        lines.push_back(text.substr(from, at == absl::string_view::npos ? absl::string_view::npos : at - from));
        ends.push_back(text.data() + text.size());
        if (at == absl::string_view::npos) break;
        from = at + 1;
      }
    }
    const int64_t n = static_cast<int64_t>(lines.size());
    std::vector<void*> out;
    OP_REQUIRES_OK(context, rows_.Allocate(context, n, &out));
    CsvRows::Scratch scratch;
    for (int64_t r = 0; r < n; ++r) {
      if (rows_.ParsePlain(lines[r], ends[r], r, out)) continue;
      OP_REQUIRES_OK(context, rows_.Parse(lines[r], r, absl::StrCat(" in record ", r), out, scratch));
    }
  }

 private:
  CsvRows rows_;
};

REGISTER_KERNEL_BUILDER(Name("TmrDecodeCsv").Device(::tensorflow::DEVICE_CPU), DecodeCsvOp);

REGISTER_OP("TmrReadCsv")
    .Input("path: string")
    .Input("size: int64")
    .Input("start: int64")
    .Input("stop: int64")
    .Output("values: out_types")
    .Attr("out_types: list({float, double, int32, int64}) >= 0")
    .Attr("columns: list(int) >= 0")
    .Attr("fields: int >= 1")
    .Attr("delimiter: string = ','")
    .Attr("header: bool = false")
    .Attr("matrix: bool = false")
    .SetIsStateful()  // it reads a file: never folded, never cached
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      bool matrix = false;
      TF_RETURN_IF_ERROR(c->GetAttr("matrix", &matrix));
      if (!matrix) return VectorOutputs(c);
      std::vector<int> columns;
      TF_RETURN_IF_ERROR(c->GetAttr("columns", &columns));
      c->set_output(0, c->Matrix(c->UnknownDim(), static_cast<int64_t>(columns.size())));
      return absl::OkStatus();
    });

// The CSV lines of file `path` (`size` bytes when the run started) that start in bytes [start, stop), each whole (the last read on past the block's end up to its newline), parsed as
// TmrDecodeCsv parses them: lines end at \n, every \r is dropped, a last line without \n counts, the file's BOM and
// (with `header`) its first line are skipped.  A bad line fails with its line number in the file (the header is
// line 1) and its bytes, escaped: tfmapreduce: CSV line N: "...": then the reason in tf.io.decode_csv's words.
class ReadCsvOp : public OpKernel {
 public:
  explicit ReadCsvOp(OpKernelConstruction* context) : OpKernel(context), rows_(context, Matrix(context)) {
    OP_REQUIRES_OK(context, context->GetAttr("header", &header_));
  }

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<tstring>()());
    const int64_t size = context->input(1).scalar<int64_t>()();
    const int64_t start = context->input(2).scalar<int64_t>()();
    const int64_t stop = std::min(size, context->input(3).scalar<int64_t>()());
    OP_REQUIRES(context, 0 <= start && start <= stop, ::tensorflow::errors::InvalidArgument("bad byte range"));
    std::unique_ptr<::tensorflow::RandomAccessFile> file;
    OP_REQUIRES_OK(context, context->env()->NewRandomAccessFile(path, &file));
    // The bytes from the one before the block (is the block's first byte a line's first?) to the block's end, then
    // on to the newline that ends its last line.
    const int64_t from = std::max<int64_t>(start - 1, 0);
    std::string text;
    OP_REQUIRES_OK(context, Read(*file, path, from, stop - from, size, &text));
    while (stop < size && !text.empty() && text.back() != '\n') {
      std::string more;
      const int64_t at = from + static_cast<int64_t>(text.size());
      OP_REQUIRES_OK(context, Read(*file, path, at, std::min<int64_t>(kMore, size - at), size, &more));
      const size_t newline = more.find('\n');
      text.append(more, 0, newline == std::string::npos ? more.size() : newline + 1);
      if (newline != std::string::npos || at + static_cast<int64_t>(more.size()) >= size) break;
    }
    size_t first = 0;  // the first line that starts in the block (the file's first starts at 0, before any BOM)
    if (start > 0) {
      const size_t newline = text.find('\n');
      first = newline == std::string::npos ? text.size() : newline + 1;
    }
    if (from + static_cast<int64_t>(first) >= stop) first = text.size();  // no line starts in the block
    // The lines are parsed where they lie, one pass: counted first (the outputs' rows), then each found by memchr
    // and parsed as it is found.
    int64_t n = 0;
    if (first < text.size()) {
      n = CountByte(text.data() + first, text.data() + text.size(), '\n') + (text.back() != '\n' ? 1 : 0);
    }
    const size_t length = text.size();
    text.append(kPad, '\0');  // bytes past the last line that ParsePlain may read
    const char* const body = text.data();
    const char* const body_end = body + length;
    const char* const readable = body + text.size();
    const char* at = body + first;  // the next line's first byte
    const bool skip = header_ && start == 0 && n > 0;
    if (skip) {
      const char* newline = static_cast<const char*>(std::memchr(at, '\n', body_end - at));
      at = newline == nullptr ? body_end : newline + 1;
      --n;
    }
    std::vector<void*> out;
    OP_REQUIRES_OK(context, rows_.Allocate(context, n, &out));
    CsvRows::Scratch scratch;
    std::string clean;  // a line with a \r, without it
    for (int64_t r = 0; r < n; ++r) {
      const char* newline = static_cast<const char*>(std::memchr(at, '\n', body_end - at));
      const char* end = newline == nullptr ? body_end : newline;
      absl::string_view line(at, static_cast<size_t>(end - at));
      const char* const line_start = at;
      at = end + 1;
      if (r == 0 && start == 0 && !skip && absl::StartsWith(line, "\xEF\xBB\xBF")) line.remove_prefix(3);
      if (!line.empty() && line.back() == '\r') {  // a \r before the \n: dropped here, any other by Parse's copy
        if (rows_.ParsePlain(line.substr(0, line.size() - 1), readable, r, out)) continue;
      } else if (rows_.ParsePlain(line, readable, r, out)) {
        continue;
      }
      if (line.find('\r') != absl::string_view::npos) {
        clean.assign(line.data(), line.size());
        clean.erase(std::remove(clean.begin(), clean.end(), '\r'), clean.end());
        line = clean;
      }
      const absl::Status parsed = rows_.Parse(line, r, "", out, scratch);
      if (parsed.ok()) continue;
      int64_t number = 1;  // the line's number in the file: 1 + the newlines before it
      OP_REQUIRES_OK(context, CountNewlines(*file, path, from + (line_start - body), size, &number));
      context->SetStatus(::tensorflow::errors::InvalidArgument("tfmapreduce: CSV line ", number, ": \"",
                                                               absl::CHexEscape(line.substr(0, kShown)), "\": ",
                                                               parsed.message()));
      return;
    }
  }

 private:
  static bool Matrix(OpKernelConstruction* context) {
    bool matrix = false;
    const absl::Status status = context->GetAttr("matrix", &matrix);
    if (!status.ok()) context->CtxFailure(__FILE__, __LINE__, status);
    return matrix;
  }

  static constexpr int64_t kMore = 1 << 16;    // bytes read at a time past a block's end, to finish its last line
  static constexpr size_t kShown = 4096;       // bytes of a bad line its error shows
  static constexpr size_t kPad = 8;            // bytes after a block's text, for reads of 8 bytes at a time

  static absl::Status Read(const ::tensorflow::RandomAccessFile& file, const std::string& path, int64_t offset,
                           int64_t n, int64_t size, std::string* out) {
    out->resize(static_cast<size_t>(n));
    return ReadExactly(file, path, offset, n, size, out->data());
  }

  // 1 + the newlines of the file before byte `stop`, into `number`.
  static absl::Status CountNewlines(const ::tensorflow::RandomAccessFile& file, const std::string& path, int64_t stop,
                                    int64_t size, int64_t* number) {
    std::string chunk;
    for (int64_t at = 0; at < stop; at += kMore * 64) {
      TF_RETURN_IF_ERROR(Read(file, path, at, std::min(kMore * 64, stop - at), size, &chunk));
      *number += std::count(chunk.begin(), chunk.end(), '\n');
    }
    return absl::OkStatus();
  }

  CsvRows rows_;
  bool header_ = false;
};

REGISTER_KERNEL_BUILDER(Name("TmrReadCsv").Device(::tensorflow::DEVICE_CPU), ReadCsvOp);

}  // namespace tfmapreduce
