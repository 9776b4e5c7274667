// tfmapreduce's native kernels, joins family: a join's matches, then its rows (see tmr.h).
//
// Its ops:
//
// TmrJoinMatch(probe: K[n], build: K[m]) -> (entry: int64[n], start: int64[g + 1], rows: int64[r],
//                                            build_matched: bool[m], total: int64)
//   The matches of a join, without its rows: one table over the build keys (K: int32, int64 or string; a
//   DenseJoinTable where integer keys span at most 4 slots a row, else a JoinTable), then each probe row's entry: its one matching build row j >= 0, ~h for the h-th build key of
//   several rows (those rows, in row order, are rows[start[h] .. start[h + 1])), or INT64_MIN for none.
//   build_matched[j]: whether build row j matched a probe row; total: the rows of the output (with keep_probe, a
//   probe row without a match counts one; with keep_build, each unmatched build row).  The job checks `total`
//   against its memory budget before TmrJoinTake makes any row.
//
// TmrJoinTake(left_keys: K[a], right_keys: K[b], left_values: TL, right_values: TR, entry, start, rows,
//             build_matched) -> (keys: K[t], left_out: TL, right_out: TR, left_matched: bool[t or 0],
//                                right_matched: bool[t or 0])
//   The rows of the join TmrJoinMatch found (the left side the probe side with probe_left), written straight into
//   the output columns: no index pairs, no gathers.  Rows come in probe row order (each one's matches in build row
//   order, or itself with keep_probe where it has none), then the unmatched build rows (keep_build).  A row
//   without a left (right) row fills that side's values: NaN for floats, 0, False, the empty string.  Value
//   columns are strings or numbers of any row shape; the masks (whether each row has a left / a right row) are
//   made only where left_mask / right_mask ask, else empty.  Entries that are not TmrJoinMatch's of these keys
//   are refused (InvalidArgument) before anything is written.

#include "tmr.h"

namespace tfmapreduce {

// The join's table from a key to an int64 entry: open addressing over integer keys (one cache line a look-up),
// absl's flat_hash_map over the bytes of string keys.
template <typename K>
class JoinTable {
 public:
  explicit JoinTable(int64_t rows) {
    while (capacity_ < 2 * static_cast<uint64_t>(rows)) capacity_ <<= 1;
    slots_.resize(capacity_, {K(), kEmpty});
  }
  // The entry of `key`, made `value` if the key is new; whether it is new.
  std::pair<int64_t*, bool> Emplace(K key, int64_t value) {
    uint64_t at = Slot(key);
    while (slots_[at].second != kEmpty) {
      if (slots_[at].first == key) return {&slots_[at].second, false};
      at = (at + 1) & (capacity_ - 1);
    }
    slots_[at] = {key, value};
    return {&slots_[at].second, true};
  }
  // Ask the memory for `key`'s slot ahead of its Find (look-ups miss the cache: a batch of them overlaps).
  void Prefetch(K key) const { __builtin_prefetch(&slots_[Slot(key)]); }
  const int64_t* Find(K key) const {
    uint64_t at = Slot(key);
    while (slots_[at].second != kEmpty) {
      if (slots_[at].first == key) return &slots_[at].second;
      at = (at + 1) & (capacity_ - 1);
    }
    return nullptr;
  }

 private:
  static constexpr int64_t kEmpty = std::numeric_limits<int64_t>::max();
  uint64_t Slot(K key) const {
    uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(key));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x & (capacity_ - 1);
  }
  uint64_t capacity_ = 16;
  std::vector<std::pair<K, int64_t>> slots_;
};

template <>
class JoinTable<tstring> {
 public:
  explicit JoinTable(int64_t rows) { map_.reserve(rows); }
  std::pair<int64_t*, bool> Emplace(const tstring& key, int64_t value) {
    auto [found, fresh] = map_.try_emplace(absl::string_view(key.data(), key.size()), value);
    return {&found->second, fresh};
  }
  void Prefetch(const tstring& key) const {}
  const int64_t* Find(const tstring& key) const {
    auto found = map_.find(absl::string_view(key.data(), key.size()));
    return found == map_.end() ? nullptr : &found->second;
  }

 private:
  absl::flat_hash_map<absl::string_view, int64_t> map_;
};

REGISTER_OP("TmrJoinMatch")
    .Input("probe: K")
    .Input("build: K")
    .Output("entry: int64")
    .Output("start: int64")
    .Output("rows: int64")
    .Output("build_matched: bool")
    .Output("total: int64")
    .Attr("K: {int32, int64, string}")
    .Attr("keep_probe: bool")
    .Attr("keep_build: bool")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->Vector(c->UnknownDim()));
      c->set_output(2, c->Vector(c->UnknownDim()));
      c->set_output(3, c->input(1));
      c->set_output(4, c->Scalar());
      return absl::OkStatus();
    });

// An entry of TmrJoinMatch for a probe row without a match.
constexpr int64_t kJoinNone = std::numeric_limits<int64_t>::min();

// The join's table over integer keys that span a small range: an array indexed by key - min, 4 bytes a slot (no
// hash, no probing; a quarter of JoinTable's bytes where the range is 2x the keys).  Entries fit 32 bits: rows and
// ~groups of fewer than 2^31 - 1 build rows.
template <typename K>
class DenseJoinTable {
 public:
  DenseJoinTable(int64_t min, uint64_t range) : min_(static_cast<uint64_t>(min)), slots_(range, kEmpty) {}
  std::pair<int32_t*, bool> Emplace(K key, int64_t value) {
    int32_t& slot = slots_[Index(key)];
    if (slot != kEmpty) return {&slot, false};
    slot = static_cast<int32_t>(value);
    return {&slot, true};
  }
  void Prefetch(K key) const {
    const uint64_t at = Index(key);
    if (at < slots_.size()) __builtin_prefetch(&slots_[at]);
  }
  const int32_t* Find(K key) const {
    const uint64_t at = Index(key);
    return at < slots_.size() && slots_[at] != kEmpty ? &slots_[at] : nullptr;
  }

 private:
  static constexpr int32_t kEmpty = std::numeric_limits<int32_t>::min();
  // Keys below min wrap to indices past the end: not found.
  uint64_t Index(K key) const { return static_cast<uint64_t>(static_cast<int64_t>(key)) - min_; }
  uint64_t min_;
  std::vector<int32_t> slots_;
};

// The span (max - min + 1, at most 2^64 - 1) and min of integer keys; (0, 0) for none.
template <typename K>
std::pair<uint64_t, int64_t> KeySpan(const typename ::tensorflow::TTypes<K>::ConstFlat& keys) {
  if (keys.size() == 0) return {0, 0};
  int64_t low = static_cast<int64_t>(keys(0)), high = low;
  for (int64_t j = 1; j < keys.size(); ++j) {
    low = std::min<int64_t>(low, keys(j));
    high = std::max<int64_t>(high, keys(j));
  }
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  return {span == std::numeric_limits<uint64_t>::max() ? span : span + 1, low};
}

template <typename K>
class JoinMatchOp : public OpKernel {
 public:
  explicit JoinMatchOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("keep_probe", &keep_probe_));
    OP_REQUIRES_OK(context, context->GetAttr("keep_build", &keep_build_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& probe_in = context->input(0);
    const Tensor& build_in = context->input(1);
    OP_REQUIRES(context, probe_in.dims() == 1 && build_in.dims() == 1,
                ::tensorflow::errors::InvalidArgument("probe and build keys must be 1-D"));
    const auto probe = probe_in.flat<K>();
    const auto build = build_in.flat<K>();
    if constexpr (!std::is_same_v<K, tstring>) {
      // Integer keys spanning at most 4 slots a row (plus a few pages): the dense table, at most half the hash's bytes.
      const auto [span, low] = KeySpan<K>(build);
      const uint64_t m = static_cast<uint64_t>(build.size());
      if (m > 0 && m < static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) && span <= 4 * m + 4096) {
        DenseJoinTable<K> table(low, span);
        Match(context, probe, build, table);
        return;
      }
    }
    JoinTable<K> table(build.size());
    Match(context, probe, build, table);
  }

 private:
  // The outputs (see TmrJoinMatch) with `table`, empty, as the build keys' table.
  template <typename Table>
  void Match(OpKernelContext* context, const typename ::tensorflow::TTypes<K>::ConstFlat& probe,
             const typename ::tensorflow::TTypes<K>::ConstFlat& build, Table& table) {
    const int64_t n = probe.size();
    const int64_t m = build.size();
    // A build key's entry is its row j >= 0 while it is on one row, else ~g for group g.
    std::vector<int64_t> group_of;
    std::vector<int64_t> counts(1, 0);
    for (int64_t j = 0; j < m; ++j) {
      auto [found, fresh] = table.Emplace(build(j), j);
      if (fresh) continue;
      if (group_of.empty()) group_of.assign(m, -1);
      if (*found >= 0) {
        const int64_t g = static_cast<int64_t>(counts.size()) - 1;
        group_of[*found] = g;
        *found = ~g;
        counts.push_back(1);
      }
      const int64_t g = ~static_cast<int64_t>(*found);
      group_of[j] = g;
      ++counts[g + 1];
    }
    const int64_t groups = static_cast<int64_t>(counts.size()) - 1;
    Tensor* start_out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({groups + 1}), &start_out));
    auto start = start_out->flat<int64_t>();
    start(0) = 0;
    for (int64_t g = 0; g < groups; ++g) start(g + 1) = start(g) + counts[g + 1];
    Tensor* rows_out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({start(groups)}), &rows_out));
    auto rows = rows_out->flat<int64_t>();
    if (groups) {
      std::vector<int64_t> next(groups);
      for (int64_t g = 0; g < groups; ++g) next[g] = start(g);
      for (int64_t j = 0; j < m; ++j) {
        if (group_of[j] >= 0) rows(next[group_of[j]]++) = j;
      }
    }
    Tensor* entry_out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({n}), &entry_out));
    auto entry = entry_out->flat<int64_t>();
    std::vector<char> used_row(m, 0), used_group(groups, 0);
    int64_t total = 0;
    constexpr int64_t kAhead = 16;
    for (int64_t i = 0; i < std::min(n, kAhead); ++i) table.Prefetch(probe(i));
    for (int64_t i = 0; i < n; ++i) {
      if (i + kAhead < n) table.Prefetch(probe(i + kAhead));
      const auto* found = table.Find(probe(i));
      if (found == nullptr) {
        entry(i) = kJoinNone;
        total += keep_probe_ ? 1 : 0;
      } else if (*found >= 0) {
        entry(i) = *found;
        used_row[*found] = 1;
        total += 1;
      } else {
        const int64_t g = ~static_cast<int64_t>(*found);
        entry(i) = *found;
        used_group[g] = 1;
        total += start(g + 1) - start(g);
      }
    }
    Tensor* matched_out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(3, TensorShape({m}), &matched_out));
    auto matched = matched_out->flat<bool>();
    int64_t unmatched = 0;
    for (int64_t j = 0; j < m; ++j) {
      matched(j) = used_row[j] || (!group_of.empty() && group_of[j] >= 0 && used_group[group_of[j]]);
      unmatched += matched(j) ? 0 : 1;
    }
    if (keep_build_) total += unmatched;
    Tensor* total_out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(4, TensorShape({}), &total_out));
    total_out->scalar<int64_t>()() = total;
  }

  bool keep_probe_ = false;
  bool keep_build_ = false;
};

REGISTER_KERNEL_BUILDER(Name("TmrJoinMatch").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int32_t>("K"),
                        JoinMatchOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("TmrJoinMatch").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int64_t>("K"),
                        JoinMatchOp<int64_t>);
REGISTER_KERNEL_BUILDER(Name("TmrJoinMatch").Device(::tensorflow::DEVICE_CPU).TypeConstraint<tstring>("K"),
                        JoinMatchOp<tstring>);

REGISTER_OP("TmrJoinTake")
    .Input("left_keys: K")
    .Input("right_keys: K")
    .Input("left_values: TL")
    .Input("right_values: TR")
    .Input("entry: int64")
    .Input("start: int64")
    .Input("rows: int64")
    .Input("build_matched: bool")
    .Output("keys: K")
    .Output("left_out: TL")
    .Output("right_out: TR")
    .Output("left_matched: bool")
    .Output("right_matched: bool")
    .Attr("K: {int32, int64, string}")
    .Attr("TL: list(type) >= 0")
    .Attr("TR: list(type) >= 0")
    .Attr("probe_left: bool")
    .Attr("keep_probe: bool")
    .Attr("keep_build: bool")
    .Attr("left_mask: bool")
    .Attr("right_mask: bool")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      for (const char* side : {"left", "right"}) {
        std::vector<::tensorflow::shape_inference::ShapeHandle> in, out;
        TF_RETURN_IF_ERROR(c->input(absl::StrCat(side, "_values"), &in));
        for (const auto& shape : in) {
          ::tensorflow::shape_inference::ShapeHandle row;
          TF_RETURN_IF_ERROR(c->ReplaceDim(shape, 0, c->UnknownDim(), &row));
          out.push_back(row);
        }
        TF_RETURN_IF_ERROR(c->set_output(absl::StrCat(side, "_out"), out));
      }
      c->set_output(c->num_outputs() - 2, c->Vector(c->UnknownDim()));
      c->set_output(c->num_outputs() - 1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

// TmrJoinMatch's entries walked in output order: f(t, probe row or -1, build row or -1) for each output row t.
class JoinWalk {
 public:
  JoinWalk(TTypes<int64_t>::ConstFlat entry, TTypes<int64_t>::ConstFlat start, TTypes<int64_t>::ConstFlat rows,
           TTypes<bool>::ConstFlat matched, bool keep_probe, bool keep_build)
      : entry_(entry), start_(start), rows_(rows), matched_(matched), keep_probe_(keep_probe), keep_build_(keep_build) {}

  // The rows of the output, or an error where the entries do not come from TmrJoinMatch of these sides.
  ::tensorflow::Status Count(int64_t probe_rows, int64_t build_rows, int64_t* total) const {
    const auto bad = ::tensorflow::errors::InvalidArgument("TmrJoinTake's entries are not TmrJoinMatch's of these keys");
    const int64_t groups = start_.size() - 1;
    if (entry_.size() != probe_rows || matched_.size() != build_rows || groups < 0 || start_(0) != 0 ||
        start_(groups) != rows_.size())
      return bad;
    for (int64_t g = 0; g < groups; ++g) {
      if (start_(g + 1) < start_(g)) return bad;
    }
    for (int64_t at = 0; at < rows_.size(); ++at) {
      if (rows_(at) < 0 || rows_(at) >= build_rows) return bad;
    }
    int64_t t = 0;
    for (int64_t i = 0; i < probe_rows; ++i) {
      const int64_t e = entry_(i);
      if (e >= 0) {
        if (e >= build_rows) return bad;
        t += 1;
      } else if (e == kJoinNone) {
        t += keep_probe_ ? 1 : 0;
      } else {
        if (~e >= groups) return bad;
        t += start_(~e + 1) - start_(~e);
      }
    }
    if (keep_build_) {
      for (int64_t j = 0; j < build_rows; ++j) t += matched_(j) ? 0 : 1;
    }
    *total = t;
    return absl::OkStatus();
  }

  template <typename F>
  void operator()(F f) const {
    int64_t t = 0;
    const int64_t n = entry_.size();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = entry_(i);
      if (e >= 0) {
        f(t++, i, e);
      } else if (e == kJoinNone) {
        if (keep_probe_) f(t++, i, int64_t{-1});
      } else {
        for (int64_t at = start_(~e); at < start_(~e + 1); ++at) f(t++, i, rows_(at));
      }
    }
    if (keep_build_) {
      for (int64_t j = 0; j < matched_.size(); ++j) {
        if (!matched_(j)) f(t++, int64_t{-1}, j);
      }
    }
  }

 private:
  TTypes<int64_t>::ConstFlat entry_, start_, rows_;
  TTypes<bool>::ConstFlat matched_;
  bool keep_probe_, keep_build_;
};

// The fill of a missing row's element of `dtype`: NaN for floats, else zero bytes (0, False).
std::vector<char> JoinFill(::tensorflow::DataType dtype, int64_t size) {
  std::vector<char> fill(size, 0);
  if (dtype == ::tensorflow::DT_FLOAT) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(fill.data(), &nan, sizeof(nan));
  } else if (dtype == ::tensorflow::DT_DOUBLE) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::memcpy(fill.data(), &nan, sizeof(nan));
  } else if (dtype == ::tensorflow::DT_HALF) {
    const uint16_t nan = 0x7E00;
    std::memcpy(fill.data(), &nan, sizeof(nan));
  } else if (dtype == ::tensorflow::DT_BFLOAT16) {
    const uint16_t nan = 0x7FC0;
    std::memcpy(fill.data(), &nan, sizeof(nan));
  }
  return fill;
}

// Rows of `in` taken into `out` (out row t: in row r, the fill where r < 0), for a walk's side `which` (0: probe).
template <typename W>
void JoinTakeRows(const JoinWalk& walk, int which, const Tensor& in, Tensor* out, const W& fill) {
  const int64_t width = in.dim_size(0) ? in.NumElements() / in.dim_size(0) : (out->dim_size(0) ? out->NumElements() / out->dim_size(0) : 0);
  const W* src = reinterpret_cast<const W*>(in.tensor_data().data());
  W* dst = reinterpret_cast<W*>(const_cast<char*>(out->tensor_data().data()));
  if (width == 1) {
    walk([&](int64_t t, int64_t p, int64_t b) {
      const int64_t r = which == 0 ? p : b;
      dst[t] = r >= 0 ? src[r] : fill;
    });
    return;
  }
  walk([&](int64_t t, int64_t p, int64_t b) {
    const int64_t r = which == 0 ? p : b;
    for (int64_t k = 0; k < width; ++k) dst[t * width + k] = r >= 0 ? src[r * width + k] : fill;
  });
}

// As JoinTakeRows, for elements of any type that copies as bytes: a row of `row_bytes` bytes at a time.
void JoinTakeBytes(const JoinWalk& walk, int which, const Tensor& in, Tensor* out) {
  const int64_t rows = std::max(in.dim_size(0), out->dim_size(0));
  const int64_t row_bytes = rows && out->dim_size(0) ? static_cast<int64_t>(out->TotalBytes()) / out->dim_size(0) : 0;
  if (row_bytes == 0) return;
  const int64_t size = ::tensorflow::DataTypeSize(in.dtype());
  const std::vector<char> one = JoinFill(in.dtype(), size);
  switch (row_bytes == size ? size : 0) {
    case 1: {
      uint8_t f;
      std::memcpy(&f, one.data(), 1);
      return JoinTakeRows<uint8_t>(walk, which, in, out, f);
    }
    case 2: {
      uint16_t f;
      std::memcpy(&f, one.data(), 2);
      return JoinTakeRows<uint16_t>(walk, which, in, out, f);
    }
    case 4: {
      uint32_t f;
      std::memcpy(&f, one.data(), 4);
      return JoinTakeRows<uint32_t>(walk, which, in, out, f);
    }
    case 8: {
      uint64_t f;
      std::memcpy(&f, one.data(), 8);
      return JoinTakeRows<uint64_t>(walk, which, in, out, f);
    }
    default:
      break;
  }
  std::vector<char> fill(row_bytes);
  for (int64_t at = 0; at + size <= row_bytes; at += size) std::memcpy(fill.data() + at, one.data(), size);
  const char* src = in.tensor_data().data();
  char* dst = const_cast<char*>(out->tensor_data().data());
  walk([&](int64_t t, int64_t p, int64_t b) {
    const int64_t r = which == 0 ? p : b;
    std::memcpy(dst + t * row_bytes, r >= 0 ? src + r * row_bytes : fill.data(), row_bytes);
  });
}

template <typename K>
class JoinTakeOp : public OpKernel {
 public:
  explicit JoinTakeOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("probe_left", &probe_left_));
    OP_REQUIRES_OK(context, context->GetAttr("keep_probe", &keep_probe_));
    OP_REQUIRES_OK(context, context->GetAttr("keep_build", &keep_build_));
    OP_REQUIRES_OK(context, context->GetAttr("left_mask", &left_mask_));
    OP_REQUIRES_OK(context, context->GetAttr("right_mask", &right_mask_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& left_keys = context->input(0);
    const Tensor& right_keys = context->input(1);
    ::tensorflow::OpInputList values[2];
    OP_REQUIRES_OK(context, context->input_list("left_values", &values[0]));
    OP_REQUIRES_OK(context, context->input_list("right_values", &values[1]));
    const int base = 2 + values[0].size() + values[1].size();
    const Tensor& entry = context->input(base);
    const Tensor& start = context->input(base + 1);
    const Tensor& rows = context->input(base + 2);
    const Tensor& matched = context->input(base + 3);
    OP_REQUIRES(context,
                left_keys.dims() == 1 && right_keys.dims() == 1 && entry.dims() == 1 && start.dims() == 1 &&
                    rows.dims() == 1 && matched.dims() == 1,
                ::tensorflow::errors::InvalidArgument("TmrJoinTake's keys and entries must be 1-D"));
    const int64_t side_rows[2] = {left_keys.dim_size(0), right_keys.dim_size(0)};
    for (int s = 0; s < 2; ++s) {
      for (int c = 0; c < values[s].size(); ++c) {
        OP_REQUIRES(context, values[s][c].dims() >= 1 && values[s][c].dim_size(0) == side_rows[s],
                    ::tensorflow::errors::InvalidArgument("each value column needs one row per key of its side"));
      }
    }
    const int probe = probe_left_ ? 0 : 1;
    const JoinWalk walk(entry.flat<int64_t>(), start.flat<int64_t>(), rows.flat<int64_t>(), matched.flat<bool>(),
                        keep_probe_, keep_build_);
    int64_t total = 0;
    OP_REQUIRES_OK(context, walk.Count(side_rows[probe], side_rows[1 - probe], &total));
    // The keys: the probe row's, else (a kept build row alone) the build row's.
    Tensor* keys_out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({total}), &keys_out));
    const auto probe_keys = (probe == 0 ? left_keys : right_keys).flat<K>();
    const auto build_keys = (probe == 0 ? right_keys : left_keys).flat<K>();
    auto keys = keys_out->flat<K>();
    walk([&](int64_t t, int64_t p, int64_t b) { keys(t) = p >= 0 ? probe_keys(p) : build_keys(b); });
    const char* names[2] = {"left_out", "right_out"};
    for (int s = 0; s < 2; ++s) {
      ::tensorflow::OpOutputList out;
      OP_REQUIRES_OK(context, context->output_list(names[s], &out));
      const int which = s == probe ? 0 : 1;
      for (int c = 0; c < values[s].size(); ++c) {
        const Tensor& in = values[s][c];
        TensorShape shape = in.shape();
        shape.set_dim(0, total);
        Tensor* column = nullptr;
        OP_REQUIRES_OK(context, out.allocate(c, shape, &column));
        if (in.dtype() == ::tensorflow::DT_STRING) {
          const int64_t width = in.dim_size(0) ? in.NumElements() / in.dim_size(0) : 0;
          const auto src = in.flat<tstring>();
          auto dst = column->flat<tstring>();
          walk([&](int64_t t, int64_t p, int64_t b) {
            const int64_t r = which == 0 ? p : b;
            for (int64_t k = 0; k < width; ++k) dst(t * width + k) = r >= 0 ? src(r * width + k) : tstring();
          });
        } else {
          OP_REQUIRES(context, ::tensorflow::DataTypeCanUseMemcpy(in.dtype()),
                      ::tensorflow::errors::Unimplemented("TmrJoinTake takes strings or numbers, not ",
                                                          ::tensorflow::DataTypeString(in.dtype())));
          JoinTakeBytes(walk, which, in, column);
        }
      }
    }
    const bool masks[2] = {left_mask_, right_mask_};
    for (int s = 0; s < 2; ++s) {
      Tensor* mask_out = nullptr;
      OP_REQUIRES_OK(context, context->allocate_output(context->num_outputs() - 2 + s,
                                                       TensorShape({masks[s] ? total : 0}), &mask_out));
      if (!masks[s]) continue;
      auto mask = mask_out->flat<bool>();
      const bool of_probe = s == probe;
      walk([&](int64_t t, int64_t p, int64_t b) { mask(t) = (of_probe ? p : b) >= 0; });
    }
  }

 private:
  bool probe_left_ = true;
  bool keep_probe_ = false;
  bool keep_build_ = false;
  bool left_mask_ = false;
  bool right_mask_ = false;
};

REGISTER_KERNEL_BUILDER(Name("TmrJoinTake").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int32_t>("K"),
                        JoinTakeOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("TmrJoinTake").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int64_t>("K"),
                        JoinTakeOp<int64_t>);
REGISTER_KERNEL_BUILDER(Name("TmrJoinTake").Device(::tensorflow::DEVICE_CPU).TypeConstraint<tstring>("K"),
                        JoinTakeOp<tstring>);

}  // namespace tfmapreduce
