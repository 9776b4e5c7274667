// tfmapreduce's native kernels, by-key family: each key's selections, sums and reducer (see tmr.h).
//
// Its ops:
//
// TmrSelectByKey(keys: K[n], values: V[n], fractions: double[q])
//     -> (distinct: K[k], counts: int64[k], low: V[k, q], high: V[k, q], top: V[k])
//   Each distinct key's order statistics, without sorting: its values grouped by key in one counting pass (floats
//   as integers ordered as numpy sorts them, every NaN last), then selected in place (nth_element).  For fraction f and a
//   key of c values, h = (c - 1) * f (in double, as numpy's virtual index); low is the value of rank floor(h),
//   high of rank min(floor(h) + 1, c - 1), and top the key's largest.  Keys come out in ascending order where they
//   span at most n + 1024 values, else in first-seen order.
//
// TmrTopKByKey(keys: K[n], values: V[n]) -> (distinct: K[m], splits: int64[m + 1], top: V[t])
//   Each distinct key's min(k, count) largest values (smallest with largest=false), in that order (numpy's order:
//   NaN above every number), as ragged rows: top[splits[j] .. splits[j + 1]) are key distinct[j]'s.  The same grouping
//   by key as TmrSelectByKey, then a selection of the k and a sort of only them.
//
// TmrPartition(keys: K[n], values: V[n]) -> (key_parts: reducers * K, value_parts: reducers * V)
//   The (key, value) rows split by each key's reducer, in row order: reducer ((k * 0x9E3779B97F4A7C15 mod 2^64) >> 32)
//   mod `reducers` of the key k as int64 (the stable hash of _ops/per_key.py's buckets), in one pass over the rows.
//
// TmrSumsByKey(keys: K[n], values: T_j[n]...) -> (distinct: K[d], sums: W_j[d]..., counts: int64[d])
//   Each distinct key's row count and the sums of each values column over its rows, in row order as W_j: the
//   built-in sums, counts and means by key (_ops/combine.py's SUMS) in two passes over the rows where the keys span a small
//   range (their min and max, then one pass that sums and counts), else through a hash table.

#include "tmr.h"

namespace tfmapreduce {

// Whether a kernel's first two inputs are (key, value) rows: 1-D, of one length.
bool RowPairs(OpKernelContext* context) {
  const Tensor& keys = context->input(0);
  if (keys.dims() == 1 && context->input(1).shape() == keys.shape()) return true;
  context->SetStatus(::tensorflow::errors::InvalidArgument("keys and values must be 1-D, of one length"));
  return false;
}

// Registers a (key, value) kernel template for int32/int64 keys and int32/int64/float/double values.
#define TMR_REGISTER_ROW_PAIRS(NAME, KERNEL)                                                                          \
  TMR_ROW_PAIR(NAME, KERNEL, int32_t, int32_t)                                                                        \
  TMR_ROW_PAIR(NAME, KERNEL, int32_t, int64_t)                                                                        \
  TMR_ROW_PAIR(NAME, KERNEL, int32_t, float)                                                                          \
  TMR_ROW_PAIR(NAME, KERNEL, int32_t, double)                                                                         \
  TMR_ROW_PAIR(NAME, KERNEL, int64_t, int32_t)                                                                        \
  TMR_ROW_PAIR(NAME, KERNEL, int64_t, int64_t)                                                                        \
  TMR_ROW_PAIR(NAME, KERNEL, int64_t, float)                                                                          \
  TMR_ROW_PAIR(NAME, KERNEL, int64_t, double)
#define TMR_ROW_PAIR(NAME, KERNEL, K, V) \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(::tensorflow::DEVICE_CPU).TypeConstraint<K>("K").TypeConstraint<V>("V"), KERNEL<K, V>);

REGISTER_OP("TmrSelectByKey")
    .Input("keys: K")
    .Input("values: V")
    .Input("fractions: double")
    .Output("distinct: K")
    .Output("counts: int64")
    .Output("low: V")
    .Output("high: V")
    .Output("top: V")
    .Attr("K: {int32, int64}")
    .Attr("V: {int32, int64, float, double}")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      auto keys = c->UnknownDim();
      auto q = c->Dim(c->input(2), 0);
      c->set_output(0, c->Vector(keys));
      c->set_output(1, c->Vector(keys));
      c->set_output(2, c->Matrix(keys, q));
      c->set_output(3, c->Matrix(keys, q));
      c->set_output(4, c->Vector(keys));
      return absl::OkStatus();
    });

// Dense ids 0, 1, ... of integer keys in first-seen order: open addressing that doubles at half full.
template <typename K>
class KeyIds {
 public:
  int64_t Id(K key) {
    uint64_t at = Slot(key);
    while (slots_[at].second >= 0) {
      if (slots_[at].first == key) return slots_[at].second;
      at = (at + 1) & (slots_.size() - 1);
    }
    const int64_t id = static_cast<int64_t>(keys_.size());
    slots_[at] = {key, id};
    keys_.push_back(key);
    if (2 * keys_.size() > slots_.size()) Grow();
    return id;
  }
  const std::vector<K>& keys() const { return keys_; }

 private:
  uint64_t Slot(K key) const {
    uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(key));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x & (slots_.size() - 1);
  }
  void Grow() {
    std::vector<std::pair<K, int64_t>> old(2 * slots_.size(), {K(), -1});
    old.swap(slots_);
    for (const auto& [key, id] : old) {
      if (id < 0) continue;
      uint64_t at = Slot(key);
      while (slots_[at].second >= 0) at = (at + 1) & (slots_.size() - 1);
      slots_[at] = {key, id};
    }
  }
  std::vector<std::pair<K, int64_t>> slots_ = std::vector<std::pair<K, int64_t>>(1024, {K(), -1});
  std::vector<K> keys_;
};

// The rows' values (as images) grouped by key in one counting pass: group j's values are values(j), keys key(j).
// A row's group is key - min where the keys span at most n + 1024 values (no hash look-up; the groups come out in
// key order), else a dense id in first-seen order.
template <typename K, typename V>
class ByKey {
 public:
  using I = typename Image<V>::type;

  ByKey(const typename TTypes<K>::ConstFlat& keys, const typename TTypes<V>::ConstFlat& values) {
    const int64_t n = keys.size();
    K lowest = n ? keys(0) : K(0), highest = lowest;
    for (int64_t i = 0; i < n; ++i) {
      lowest = std::min(lowest, keys(i));
      highest = std::max(highest, keys(i));
    }
    const uint64_t span = static_cast<uint64_t>(highest) - static_cast<uint64_t>(lowest);
    direct_ = span <= static_cast<uint64_t>(n + 1024);
    base_ = static_cast<uint64_t>(lowest);
    std::vector<int64_t> id;
    if (!direct_) {
      id.resize(n);
      for (int64_t i = 0; i < n; ++i) id[i] = ids_.Id(keys(i));
    }
    const int64_t groups = direct_ ? (n ? static_cast<int64_t>(span) + 1 : 0) : static_cast<int64_t>(ids_.keys().size());
    auto group_of = [&](int64_t i) -> int64_t {
      return direct_ ? static_cast<int64_t>(static_cast<uint64_t>(keys(i)) - base_) : id[i];
    };
    start_.assign(groups + 1, 0);
    for (int64_t i = 0; i < n; ++i) ++start_[group_of(i) + 1];
    for (int64_t g = 0; g < groups; ++g) {
      if (start_[g + 1] > 0) present_.push_back(g);
      start_[g + 1] += start_[g];
    }
    grouped_.resize(n);
    std::vector<int64_t> next(start_.begin(), start_.end() - 1);
    for (int64_t i = 0; i < n; ++i) grouped_[next[group_of(i)]++] = Image<V>::To(values(i));
  }

  int64_t size() const { return static_cast<int64_t>(present_.size()); }
  K key(int64_t j) const {
    const int64_t g = present_[j];
    return direct_ ? static_cast<K>(base_ + static_cast<uint64_t>(g)) : ids_.keys()[g];
  }
  I* values(int64_t j) { return grouped_.data() + start_[present_[j]]; }
  int64_t count(int64_t j) const { return start_[present_[j] + 1] - start_[present_[j]]; }

 private:
  bool direct_ = true;
  uint64_t base_ = 0;
  KeyIds<K> ids_;
  std::vector<int64_t> start_, present_;
  std::vector<I> grouped_;
};

template <typename K, typename V>
class SelectByKeyOp : public OpKernel {
 public:
  explicit SelectByKeyOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    if (!RowPairs(context)) return;
    const Tensor& key_input = context->input(0);
    const Tensor& value_input = context->input(1);
    const Tensor& fraction_input = context->input(2);
    OP_REQUIRES(context, fraction_input.dims() == 1, ::tensorflow::errors::InvalidArgument("fractions must be 1-D"));
    const auto fractions = fraction_input.flat<double>();
    const int64_t q = fractions.size();
    using I = typename Image<V>::type;
    ByKey<K, V> by_key(key_input.flat<K>(), value_input.flat<V>());
    const int64_t k = by_key.size();
    Tensor *distinct_out, *counts_out, *low_out, *high_out, *top_out;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({k}), &distinct_out));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({k}), &counts_out));
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({k, q}), &low_out));
    OP_REQUIRES_OK(context, context->allocate_output(3, TensorShape({k, q}), &high_out));
    OP_REQUIRES_OK(context, context->allocate_output(4, TensorShape({k}), &top_out));
    auto distinct = distinct_out->flat<K>();
    auto counts = counts_out->flat<int64_t>();
    auto low = low_out->matrix<V>();
    auto high = high_out->matrix<V>();
    auto top = top_out->flat<V>();
    std::vector<int64_t> below(q), ranks;
    for (int64_t j = 0; j < k; ++j) {
      I* values = by_key.values(j);
      const int64_t c = by_key.count(j);
      distinct(j) = by_key.key(j);
      counts(j) = c;
      ranks.clear();
      for (int64_t f = 0; f < q; ++f) {
        below[f] = std::clamp<int64_t>(static_cast<int64_t>(std::floor(double(c - 1) * fractions(f))), 0, c - 1);
        ranks.push_back(below[f]);
        ranks.push_back(std::min(below[f] + 1, c - 1));
      }
      std::sort(ranks.begin(), ranks.end());
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
      int64_t from = 0;
      for (int64_t r : ranks) {  // each rank selected among the values after the previous one (all of them ≥ it)
        if (r == from) {
          std::iter_swap(values + r, std::min_element(values + r, values + c));
        } else {
          std::nth_element(values + from, values + r, values + c);
        }
        from = r + 1;
      }
      top(j) = Image<V>::From(*std::max_element(values + ranks.back(), values + c));
      for (int64_t f = 0; f < q; ++f) {
        low(j, f) = Image<V>::From(values[below[f]]);
        high(j, f) = Image<V>::From(values[std::min(below[f] + 1, c - 1)]);
      }
    }
  }
};

TMR_REGISTER_ROW_PAIRS("TmrSelectByKey", SelectByKeyOp)

REGISTER_OP("TmrTopKByKey")
    .Input("keys: K")
    .Input("values: V")
    .Output("distinct: K")
    .Output("splits: int64")
    .Output("top: V")
    .Attr("k: int >= 1")
    .Attr("largest: bool")
    .Attr("K: {int32, int64}")
    .Attr("V: {int32, int64, float, double}")
    .SetShapeFn(VectorOutputs);

template <typename K, typename V>
class TopKByKeyOp : public OpKernel {
 public:
  explicit TopKByKeyOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("k", &k_));
    OP_REQUIRES_OK(context, context->GetAttr("largest", &largest_));
  }

  void Compute(OpKernelContext* context) override {
    if (!RowPairs(context)) return;
    const Tensor& key_input = context->input(0);
    const Tensor& value_input = context->input(1);
    using I = typename Image<V>::type;
    ByKey<K, V> by_key(key_input.flat<K>(), value_input.flat<V>());
    const int64_t m = by_key.size();
    Tensor *distinct_out, *splits_out, *top_out;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({m}), &distinct_out));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({m + 1}), &splits_out));
    auto distinct = distinct_out->flat<K>();
    auto splits = splits_out->flat<int64_t>();
    splits(0) = 0;
    for (int64_t j = 0; j < m; ++j) {
      distinct(j) = by_key.key(j);
      splits(j + 1) = splits(j) + std::min<int64_t>(by_key.count(j), k_);
    }
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({splits(m)}), &top_out));
    auto top = top_out->flat<V>();
    for (int64_t j = 0; j < m; ++j) {
      I* values = by_key.values(j);
      const int64_t c = by_key.count(j);
      const int64_t take = splits(j + 1) - splits(j);
      // The key's `take` first values in the wanted order, sorted: a selection of them first where there are more.
      auto first = [this](I a, I b) { return largest_ ? a > b : a < b; };
      if (take < c) std::nth_element(values, values + take - 1, values + c, first);
      std::sort(values, values + take, first);
      for (int64_t t = 0; t < take; ++t) top(splits(j) + t) = Image<V>::From(values[t]);
    }
  }

 private:
  int64_t k_ = 1;
  bool largest_ = true;
};

TMR_REGISTER_ROW_PAIRS("TmrTopKByKey", TopKByKeyOp)

REGISTER_OP("TmrPartition")
    .Input("keys: K")
    .Input("values: V")
    .Output("key_parts: reducers * K")
    .Output("value_parts: reducers * V")
    .Attr("reducers: int >= 1")
    .Attr("K: {int32, int64}")
    .Attr("V: {int32, int64, float, double}")
    .SetShapeFn(VectorOutputs);

template <typename K, typename V>
class PartitionOp : public OpKernel {
 public:
  explicit PartitionOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("reducers", &reducers_));
  }

  void Compute(OpKernelContext* context) override {
    if (!RowPairs(context)) return;
    const Tensor& key_input = context->input(0);
    const Tensor& value_input = context->input(1);
    const auto keys = key_input.flat<K>();
    const auto values = value_input.flat<V>();
    const int64_t n = keys.size();
    const uint64_t reducers = static_cast<uint64_t>(reducers_);
    std::vector<int32_t> bucket(n);
    std::vector<int64_t> counts(reducers_, 0);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t mixed = static_cast<uint64_t>(static_cast<int64_t>(keys(i))) * 0x9E3779B97F4A7C15ULL;
      bucket[i] = static_cast<int32_t>((mixed >> 32) % reducers);
      ++counts[bucket[i]];
    }
    ::tensorflow::OpOutputList key_parts, value_parts;
    OP_REQUIRES_OK(context, context->output_list("key_parts", &key_parts));
    OP_REQUIRES_OK(context, context->output_list("value_parts", &value_parts));
    std::vector<K*> key_out(reducers_);
    std::vector<V*> value_out(reducers_);
    for (int r = 0; r < reducers_; ++r) {
      Tensor* part = nullptr;
      OP_REQUIRES_OK(context, key_parts.allocate(r, TensorShape({counts[r]}), &part));
      key_out[r] = part->flat<K>().data();
      OP_REQUIRES_OK(context, value_parts.allocate(r, TensorShape({counts[r]}), &part));
      value_out[r] = part->flat<V>().data();
    }
    for (int64_t i = 0; i < n; ++i) {
      *key_out[bucket[i]]++ = keys(i);
      *value_out[bucket[i]]++ = values(i);
    }
  }

 private:
  int reducers_ = 1;
};

TMR_REGISTER_ROW_PAIRS("TmrPartition", PartitionOp)

REGISTER_OP("TmrSumsByKey")
    .Input("keys: K")
    .Input("values: T")
    .Output("distinct: K")
    .Output("sums: out_types")
    .Output("counts: int64")
    .Attr("K: {int32, int64}")
    .Attr("T: list({float, double, int32, int64}) >= 0")
    .Attr("out_types: list({float, double, int32, int64}) >= 0")
    .Attr("dense_slack: int >= 0")
    .SetShapeFn(VectorOutputs);

// Adds values[i] (as W) into sums[bin(i)] for every row i, and counts each row where `counts` is given: one pass.
template <typename T, typename W, typename Bin>
void SumInto(const Tensor& values, int64_t n, const Bin& bin, W* sums, int64_t* counts) {
  const T* v = values.flat<T>().data();
  if (counts == nullptr) {
    for (int64_t i = 0; i < n; ++i) sums[bin(i)] += static_cast<W>(v[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = bin(i);
    sums[b] += static_cast<W>(v[i]);
    ++counts[b];
  }
}

// SumInto for the dtypes the op takes: T -> W is T itself, its wide type, or double.
template <typename Bin>
absl::Status SumAs(const Tensor& values, Tensor* sums, int64_t n, const Bin& bin, int64_t* counts) {
  using ::tensorflow::DataType;
#define TMR_SUM_AS(TE, T, WE, W) \
  if (values.dtype() == ::tensorflow::TE && sums->dtype() == ::tensorflow::WE) \
    return SumInto<T, W>(values, n, bin, sums->flat<W>().data(), counts), absl::OkStatus();
  TMR_SUM_AS(DT_FLOAT, float, DT_FLOAT, float)
  TMR_SUM_AS(DT_FLOAT, float, DT_DOUBLE, double)
  TMR_SUM_AS(DT_DOUBLE, double, DT_DOUBLE, double)
  TMR_SUM_AS(DT_INT32, int32_t, DT_INT32, int32_t)
  TMR_SUM_AS(DT_INT32, int32_t, DT_INT64, int64_t)
  TMR_SUM_AS(DT_INT32, int32_t, DT_DOUBLE, double)
  TMR_SUM_AS(DT_INT64, int64_t, DT_INT64, int64_t)
  TMR_SUM_AS(DT_INT64, int64_t, DT_DOUBLE, double)
#undef TMR_SUM_AS
  return ::tensorflow::errors::InvalidArgument("TmrSumsByKey cannot sum ", ::tensorflow::DataTypeString(values.dtype()),
                                               " as ", ::tensorflow::DataTypeString(sums->dtype()));
}

// TmrSumsByKey(keys: K[n], values: T_j[n]...) -> (distinct: K[d], sums: W_j[d]..., counts: int64[d])
//   Each distinct key's row count and the sum of each values column over its rows, accumulated as W_j in row order
//   (as Bincount with weights does).  Keys spanning at most 2n + dense_slack values are binned by their offset from
//   the smallest (a min/max pass, then one pass that sums and counts) and come out ascending; others are binned by a
//   hash table and come out in first-seen order.
template <typename K>
class SumsByKeyOp : public OpKernel {
 public:
  explicit SumsByKeyOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("out_types", &out_types_));
    OP_REQUIRES_OK(context, context->GetAttr("dense_slack", &dense_slack_));
  }

  void Compute(OpKernelContext* context) override {
    const Tensor& key_input = context->input(0);
    ::tensorflow::OpInputList values;
    OP_REQUIRES_OK(context, context->input_list("values", &values));
    OP_REQUIRES(context, key_input.dims() == 1 && static_cast<int>(out_types_.size()) == values.size(),
                ::tensorflow::errors::InvalidArgument("keys must be 1-D, with a sum type per values column"));
    const K* keys = key_input.flat<K>().data();
    const int64_t n = key_input.NumElements();
    for (const Tensor& column : values) {
      OP_REQUIRES(context, column.shape() == key_input.shape(),
                  ::tensorflow::errors::InvalidArgument("every values column must have one row per key"));
    }
    K lo = 0, hi = 0;
    if (n > 0) {
      lo = hi = keys[0];
      for (int64_t i = 1; i < n; ++i) {
        lo = std::min(lo, keys[i]);
        hi = std::max(hi, keys[i]);
      }
    }
    const bool dense = n > 0 && static_cast<double>(hi) - static_cast<double>(lo) <= 2.0 * n + dense_slack_;
    std::vector<int32_t> ids;  // each row's bin where the keys are hashed
    std::vector<K> seen;       // each bin's key, in first-seen order (hashed)
    if (!dense) {
      absl::flat_hash_map<K, int32_t> index;
      index.reserve(n);
      ids.resize(n);
      for (int64_t i = 0; i < n; ++i) {
        const auto [at, added] = index.try_emplace(keys[i], static_cast<int32_t>(seen.size()));
        if (added) seen.push_back(keys[i]);
        ids[i] = at->second;
      }
    }
    const int64_t bins = dense ? static_cast<int64_t>(hi - lo) + 1 : static_cast<int64_t>(seen.size());
    std::vector<int64_t> counts(bins, 0);
    std::vector<Tensor> sums(values.size());
    for (int j = 0; j < values.size(); ++j) {
      OP_REQUIRES_OK(context, context->allocate_temp(out_types_[j], ::tensorflow::TensorShape({bins}), &sums[j]));
      std::memset(sums[j].data(), 0, sums[j].TotalBytes());
      int64_t* counted = j == 0 ? counts.data() : nullptr;  // counted with the first column, or alone below
      if (dense) {
        OP_REQUIRES_OK(context, SumAs(values[j], &sums[j], n, [&](int64_t i) { return int64_t{keys[i] - lo}; }, counted));
      } else {
        OP_REQUIRES_OK(context, SumAs(values[j], &sums[j], n, [&](int64_t i) { return int64_t{ids[i]}; }, counted));
      }
    }
    if (values.size() == 0) {
      for (int64_t i = 0; i < n; ++i) ++counts[dense ? static_cast<int64_t>(keys[i] - lo) : ids[i]];
    }
    std::vector<int64_t> order;  // the bins to output: those with rows
    for (int64_t b = 0; b < bins; ++b) {
      if (counts[b] > 0) order.push_back(b);
    }
    const int64_t d = static_cast<int64_t>(order.size());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output("distinct", ::tensorflow::TensorShape({d}), &out));
    K* distinct = out->flat<K>().data();
    for (int64_t r = 0; r < d; ++r) distinct[r] = dense ? static_cast<K>(lo + order[r]) : seen[order[r]];
    ::tensorflow::OpOutputList sum_outputs;
    OP_REQUIRES_OK(context, context->output_list("sums", &sum_outputs));
    for (int j = 0; j < values.size(); ++j) {
      OP_REQUIRES_OK(context, sum_outputs.allocate(j, ::tensorflow::TensorShape({d}), &out));
      const size_t width = ::tensorflow::DataTypeSize(out_types_[j]);
      const char* from = static_cast<const char*>(sums[j].data());
      char* to = static_cast<char*>(out->data());
      for (int64_t r = 0; r < d; ++r) std::memcpy(to + r * width, from + order[r] * width, width);
    }
    OP_REQUIRES_OK(context, context->allocate_output("counts", ::tensorflow::TensorShape({d}), &out));
    for (int64_t r = 0; r < d; ++r) out->flat<int64_t>()(r) = counts[order[r]];
  }

 private:
  ::tensorflow::DataTypeVector out_types_;
  int64_t dense_slack_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("TmrSumsByKey").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int32_t>("K"),
                        SumsByKeyOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("TmrSumsByKey").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int64_t>("K"),
                        SumsByKeyOp<int64_t>);

}  // namespace tfmapreduce
