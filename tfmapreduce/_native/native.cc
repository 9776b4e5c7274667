// tfmapreduce's native kernels: TensorFlow custom ops compiled on the machine that runs them (see _native.py).
//
// TmrWordCounts(text: string[...]) -> (words: string[k], counts: int64[k])
//   Splits every element of `text` on ASCII whitespace (space, \t, \n, \v, \f, \r: what Python's
//   bytes.split() and tf.strings.split split on) and counts each distinct word, in one pass: the
//   map-side combine of word_count without a string per word.  Words come out in first-seen order.
//
// TmrStableArgsort(keys: int32[n] or int64[n]) -> order: int64[n]
//   The indices that sort `keys` ascending, equal keys in index order (tf.argsort(stable=True)): an LSD radix
//   sort on 11-bit digits of the keys with their sign bit flipped, skipping digits every key shares.
//
// TmrSortValues(values: T[n], descending) -> sorted: T[n]
//   The values sorted as numpy sorts them (floats: NaN last, -0.0 as 0.0), or in the reverse order: the same radix
//   sort on their bits made unsigned integers of the same order, with no row numbers.
//
// TmrSortPairs(keys: K[n], values: V[n]) -> (sorted_keys: K[n], sorted_values: V[n], starts: int64[k])
//   The (key, value) rows sorted by key, then by value, both as signed integers (K, V: int32 or int64): the
//   same LSD radix sort (values' digits first, then keys'), moving the rows themselves, not an order to gather
//   them by; starts[j]: the first sorted row of the j-th distinct key.
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
//   mod `reducers` of the key k as int64 (the stable hash of _per_key.buckets), in one pass over the rows.
//
// TmrSumsByKey(keys: K[n], values: T_j[n]...) -> (distinct: K[d], sums: W_j[d]..., counts: int64[d])
//   Each distinct key's row count and the sums of each values column over its rows, in row order as W_j: the
//   built-in sums, counts and means by key (_combine.SUMS) in two passes over the rows where the keys span a small
//   range (their min and max, then one pass that sums and counts), else through a hash table.

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
//
// TmrReadRows(path: string, size: int64, offset: int64, count: int64) -> values: T[count]
//   `count` elements of type T stored at byte `offset` of file `path` (`size` bytes when the run started): with
//   map=true, of a local file at an offset TensorFlow's alignment allows, the file's own pages mapped read-only (no
//   copy; see `mapped` below for a file truncated meanwhile); else read through TensorFlow's file system straight
//   into the output tensor (one copy from the page cache, no string record, no decode).  A file of another size
//   fails, saying it no longer has the size it had.
//
// TmrWideSum(values: float[...]) -> sum: double
//   The sum of float32 values accumulated in float64, as tf.reduce_sum(tf.cast(values, tf.float64)) gives it to
//   within float64 rounding, without the float64 copy: the exact sums' fast path (_numerics.exact_sum).
//
// TmrStringRanks(strings: string[n]) -> ranks: int64[n]
//   Each string's rank among the distinct strings in byte order (unsigned bytes, a prefix first, as numpy sorts
//   `S` arrays): equal strings get one rank, so the ranks sort as the strings do.
//
// TmrCheckCancelled()
//   Fails (Cancelled) once the step it runs in is cancelled (its run given up, or failed elsewhere), else does
//   nothing: TensorFlow's executor never stops a step between kernels, so the engine runs one of these before
//   each op of a map function (see _cancel.py), and a given-up run stops at its next op instead of running on.

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/cancellation.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"
#include "tensorflow/core/util/work_sharder.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfmapreduce {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TTypes;
using ::tensorflow::tstring;

REGISTER_OP("TmrWordCounts")
    .Input("text: string")
    .Output("words: string")
    .Output("counts: int64")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(c->UnknownDim()));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

inline bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

class WordCountsOp : public OpKernel {
 public:
  explicit WordCountsOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const auto text = context->input(0).flat<tstring>();
    absl::flat_hash_map<absl::string_view, int64_t> counts;
    std::vector<absl::string_view> order;
    for (int64_t i = 0; i < text.size(); ++i) {
      const char* p = text(i).data();
      const char* end = p + text(i).size();
      while (p < end) {
        while (p < end && IsSpace(*p)) ++p;
        const char* start = p;
        while (p < end && !IsSpace(*p)) ++p;
        if (p > start) {
          auto [entry, fresh] = counts.try_emplace(absl::string_view(start, p - start), 0);
          if (fresh) order.push_back(entry->first);
          ++entry->second;
        }
      }
    }
    const int64_t k = static_cast<int64_t>(order.size());
    Tensor* words = nullptr;
    Tensor* totals = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({k}), &words));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({k}), &totals));
    auto w = words->flat<tstring>();
    auto n = totals->flat<int64_t>();
    for (int64_t j = 0; j < k; ++j) {
      w(j) = tstring(order[j].data(), order[j].size());
      n(j) = counts[order[j]];
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("TmrWordCounts").Device(::tensorflow::DEVICE_CPU), WordCountsOp);

REGISTER_OP("TmrStableArgsort")
    .Input("keys: T")
    .Output("order: int64")
    .Attr("T: {int32, int64}")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

// The digits of an LSD radix sort: 11 bits each, and a row's digit d of `x` (as unsigned, sign bit flipped).
constexpr int kRadixBits = 11;
constexpr int kRadix = 1 << kRadixBits;

template <typename U>
inline size_t Digit(U x, int d) {
  return static_cast<size_t>((x >> (d * kRadixBits)) & (kRadix - 1));
}

// One stable counting pass: the rows (a[i], b[i]) reordered by digit d of a[i], from its digit counts (the keys
// alone where b is null).
template <typename A, typename B>
void RadixPass(std::vector<A>& a, std::vector<B>* b, std::vector<A>& a_next, std::vector<B>* b_next, int d,
               const std::vector<int64_t>& counts) {
  std::vector<int64_t> start(kRadix, 0);
  for (int v = 1; v < kRadix; ++v) start[v] = start[v - 1] + counts[v - 1];
  if (b == nullptr) {
    for (size_t i = 0; i < a.size(); ++i) a_next[start[Digit(a[i], d)]++] = a[i];
  } else {
    for (size_t i = 0; i < a.size(); ++i) {
      const int64_t to = start[Digit(a[i], d)]++;
      a_next[to] = a[i];
      (*b_next)[to] = (*b)[i];
    }
    std::swap(*b, *b_next);
  }
  std::swap(a, a_next);
}

// The rows (a[i], b[i]) sorted stably by a[i] (unsigned), or the keys a alone where b is null: every digit's counts
// in one read, then one pass per digit, skipping a digit every row shares.
template <typename A, typename B>
void RadixSort(std::vector<A>& a, std::vector<B>* b) {
  constexpr int kDigits = (std::numeric_limits<A>::digits + kRadixBits - 1) / kRadixBits;
  const size_t n = a.size();
  std::vector<std::vector<int64_t>> counts(kDigits, std::vector<int64_t>(kRadix, 0));
  for (size_t i = 0; i < n; ++i) {
    for (int d = 0; d < kDigits; ++d) ++counts[d][Digit(a[i], d)];
  }
  std::vector<A> a_next(n);
  std::vector<B> b_next(b == nullptr ? 0 : n);
  for (int d = 0; d < kDigits; ++d) {
    const bool shared = std::any_of(counts[d].begin(), counts[d].end(), [n](int64_t c) { return c == int64_t(n); });
    if (!shared) RadixPass(a, b, a_next, b == nullptr ? nullptr : &b_next, d, counts[d]);
  }
}

// Signed keys as unsigned of the same order (the sign bit flipped), and back.
template <typename K>
inline std::make_unsigned_t<K> Unsigned(K x) {
  using U = std::make_unsigned_t<K>;
  return static_cast<U>(x) ^ (U(1) << (std::numeric_limits<U>::digits - 1));
}

template <typename K>
inline K Signed(std::make_unsigned_t<K> x) {
  return static_cast<K>(Unsigned(static_cast<K>(x)));
}

template <typename K, typename I>
void StableOrder(const typename ::tensorflow::TTypes<K>::ConstFlat& keys, typename ::tensorflow::TTypes<int64_t>::Flat order) {
  const int64_t n = keys.size();
  std::vector<std::make_unsigned_t<K>> key(n);
  std::vector<I> index(n);
  for (int64_t i = 0; i < n; ++i) {
    key[i] = Unsigned(keys(i));
    index[i] = I(i);
  }
  RadixSort(key, &index);
  for (int64_t i = 0; i < n; ++i) order(i) = index[i];
}

template <typename K>
class StableArgsortOp : public OpKernel {
 public:
  explicit StableArgsortOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    OP_REQUIRES(context, input.dims() == 1, ::tensorflow::errors::InvalidArgument("keys must be 1-D"));
    const int64_t n = input.NumElements();
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({n}), &output));
    if (n <= std::numeric_limits<int32_t>::max()) {  // 4-byte row numbers: less to move per pass
      StableOrder<K, int32_t>(input.flat<K>(), output->flat<int64_t>());
    } else {
      StableOrder<K, int64_t>(input.flat<K>(), output->flat<int64_t>());
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("TmrStableArgsort").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int32_t>("T"),
                        StableArgsortOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("TmrStableArgsort").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int64_t>("T"),
                        StableArgsortOp<int64_t>);


REGISTER_OP("TmrSortPairs")
    .Input("keys: K")
    .Input("values: V")
    .Output("sorted_keys: K")
    .Output("sorted_values: V")
    .Output("starts: int64")
    .Attr("K: {int32, int64}")
    .Attr("V: {int32, int64}")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      c->set_output(2, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

template <typename K, typename V>
class SortPairsOp : public OpKernel {
 public:
  explicit SortPairsOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    using UK = std::make_unsigned_t<K>;
    using UV = std::make_unsigned_t<V>;
    const Tensor& key_input = context->input(0);
    const Tensor& value_input = context->input(1);
    OP_REQUIRES(context, key_input.dims() == 1 && value_input.shape() == key_input.shape(),
                ::tensorflow::errors::InvalidArgument("keys and values must be 1-D, of one length"));
    const auto keys = key_input.flat<K>();
    const auto values = value_input.flat<V>();
    const int64_t n = keys.size();
    std::vector<UK> key(n);
    std::vector<UV> value(n);
    for (int64_t i = 0; i < n; ++i) {
      key[i] = Unsigned(keys(i));
      value[i] = Unsigned(values(i));
    }
    RadixSort(value, &key);  // values' digits first, then keys': sorted by (key, value)
    RadixSort(key, &value);
    Tensor* key_output = nullptr;
    Tensor* value_output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({n}), &key_output));
    OP_REQUIRES_OK(context, context->allocate_output(1, TensorShape({n}), &value_output));
    auto sorted_keys = key_output->flat<K>();
    auto sorted_values = value_output->flat<V>();
    std::vector<int64_t> starts;
    for (int64_t i = 0; i < n; ++i) {
      if (i == 0 || key[i] != key[i - 1]) starts.push_back(i);
      sorted_keys(i) = Signed<K>(key[i]);
      sorted_values(i) = Signed<V>(value[i]);
    }
    Tensor* starts_output = nullptr;
    const int64_t k = static_cast<int64_t>(starts.size());
    OP_REQUIRES_OK(context, context->allocate_output(2, TensorShape({k}), &starts_output));
    std::copy(starts.begin(), starts.end(), starts_output->flat<int64_t>().data());
  }
};

#define TMR_SORT_PAIRS(K, V)                                                                                   \
  REGISTER_KERNEL_BUILDER(                                                                                     \
      Name("TmrSortPairs").Device(::tensorflow::DEVICE_CPU).TypeConstraint<K>("K").TypeConstraint<V>("V"), \
      SortPairsOp<K, V>);
TMR_SORT_PAIRS(int32_t, int32_t)
TMR_SORT_PAIRS(int32_t, int64_t)
TMR_SORT_PAIRS(int64_t, int32_t)
TMR_SORT_PAIRS(int64_t, int64_t)
#undef TMR_SORT_PAIRS

// The shape function of ops whose every output is a vector of unknown length.
absl::Status VectorOutputs(::tensorflow::shape_inference::InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

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

// A value as a signed integer of its width, ordered as numpy sorts the values (floats: IEEE bits made monotone, one
// NaN above +inf), and back (every NaN comes back as one NaN).
template <typename V>
struct Image {
  using type = V;
  static V To(V v) { return v; }
  static V From(V v) { return v; }
};
template <typename F, typename I>
struct FloatImage {
  using type = I;
  static I To(F v) {
    if (std::isnan(v)) v = std::numeric_limits<F>::quiet_NaN();
    I bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits < 0 ? bits ^ std::numeric_limits<I>::max() : bits;
  }
  static F From(I bits) {
    if (bits < 0) bits ^= std::numeric_limits<I>::max();
    F v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
};
template <>
struct Image<float> : FloatImage<float, int32_t> {};
template <>
struct Image<double> : FloatImage<double, int64_t> {};

REGISTER_OP("TmrSortValues")
    .Input("values: T")
    .Output("sorted: T")
    .Attr("T: {int32, int64, float, double}")
    .Attr("descending: bool = false")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

// The values sorted (numpy's order; descending: its reverse), by the radix sort of their images: no row numbers to
// carry, no gather after, no pass of TensorFlow ops to map floats to integers and back.
template <typename T>
class SortValuesOp : public OpKernel {
 public:
  explicit SortValuesOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("descending", &descending_));
  }

  void Compute(OpKernelContext* context) override {
    using I = typename Image<T>::type;
    using U = std::make_unsigned_t<I>;
    const Tensor& input = context->input(0);
    OP_REQUIRES(context, input.dims() == 1, ::tensorflow::errors::InvalidArgument("values must be 1-D"));
    const auto values = input.flat<T>();
    const int64_t n = values.size();
    std::vector<U> image(n);
    for (int64_t i = 0; i < n; ++i) {
      I bits = Image<T>::To(values(i));
      if (std::is_floating_point<T>::value && bits == I(-1)) bits = 0;  // -0.0 as 0.0 (by its bits: subnormals stay)
      image[i] = Unsigned(bits);
    }
    RadixSort(image, static_cast<std::vector<U>*>(nullptr));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &output));
    auto sorted = output->flat<T>();
    for (int64_t i = 0; i < n; ++i) sorted(descending_ ? n - 1 - i : i) = Image<T>::From(Signed<I>(image[i]));
  }

 private:
  bool descending_ = false;
};

#define TMR_SORT_VALUES(T) \
  REGISTER_KERNEL_BUILDER(Name("TmrSortValues").Device(::tensorflow::DEVICE_CPU).TypeConstraint<T>("T"), SortValuesOp<T>);
TMR_SORT_VALUES(int32_t)
TMR_SORT_VALUES(int64_t)
TMR_SORT_VALUES(float)
TMR_SORT_VALUES(double)
#undef TMR_SORT_VALUES

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

// The file no longer has `size` bytes: the error the client names the file by (see _text.RESIZED).
absl::Status Resized(const std::string& path, int64_t size) {
  return ::tensorflow::errors::InvalidArgument(path, " no longer has the size it had when the run started (", size,
                                               " bytes)");
}

// `n` bytes at `offset` into `out`, all there (the file no longer has `size` bytes otherwise).
absl::Status ReadExactly(const ::tensorflow::RandomAccessFile& file, const std::string& path, int64_t offset,
                         int64_t n, int64_t size, char* out) {
  absl::string_view got;
  absl::Status status = file.Read(static_cast<uint64_t>(offset), static_cast<size_t>(n), &got, out);
  if (!status.ok() && !absl::IsOutOfRange(status)) return status;
  if (static_cast<int64_t>(got.size()) != n) return Resized(path, size);
  if (got.data() != out) std::memcpy(out, got.data(), got.size());
  return absl::OkStatus();
}

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

REGISTER_OP("TmrWideSum")
    .Input("values: float")
    .Output("sum: double")
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape);

// The sum of float32 values in float64, every value widened as it is read (no float64 copy of them), in chunks of
// kChunk values summed over the intra-op threads; each chunk in eight float64 lanes, the chunks' sums added in order,
// so the result does not depend on the threads.
class WideSumOp : public OpKernel {
 public:
  explicit WideSumOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& values = context->input(0);
    const float* v = reinterpret_cast<const float*>(values.tensor_data().data());
    const int64_t n = values.NumElements();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> sums(static_cast<size_t>(chunks));
    auto work = [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) sums[c] = Chunk(v + c * kChunk, std::min(kChunk, n - c * kChunk));
    };
    const auto* threads = context->device()->tensorflow_cpu_worker_threads();
    ::tensorflow::Shard(threads->num_threads, threads->workers, chunks, kChunk, work);
    double total = 0;
    for (const double s : sums) total += s;
    Tensor* out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({}), &out));
    out->scalar<double>()() = total;
  }

 private:
  static constexpr int64_t kChunk = 1 << 16;

  static double Chunk(const float* v, int64_t n) {
#if defined(__x86_64__)
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) return ChunkAvx2(v, n);
#endif
    double lane[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) lane[j] += static_cast<double>(v[i + j]);
    }
    double rest = 0;
    for (; i < n; ++i) rest += static_cast<double>(v[i]);
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + rest;
  }

#if defined(__x86_64__)
  // The same sum, four floats widened at a time into four lanes of four doubles (the compiler's -O2 code widens
  // and adds one float at a time: 3x slower, below memory speed).
  __attribute__((target("avx2"))) static double ChunkAvx2(const float* v, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(v + i)));
      a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(v + i + 4)));
      a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm_loadu_ps(v + i + 8)));
      a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm_loadu_ps(v + i + 12)));
    }
    alignas(32) double lane[4];
    _mm256_store_pd(lane, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    double rest = 0;
    for (; i < n; ++i) rest += static_cast<double>(v[i]);
    return (lane[0] + lane[1]) + (lane[2] + lane[3]) + rest;
  }
#endif
};

REGISTER_KERNEL_BUILDER(Name("TmrWideSum").Device(::tensorflow::DEVICE_CPU), WideSumOp);

REGISTER_OP("TmrStringRanks")
    .Input("strings: string")
    .Output("ranks: int64")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      return absl::OkStatus();
    });

class StringRanksOp : public OpKernel {
 public:
  explicit StringRanksOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const Tensor& input = context->input(0);
    const auto strings = input.flat<tstring>();
    const int64_t n = strings.size();
    std::vector<absl::string_view> view(n);
    for (int64_t i = 0; i < n; ++i) view[i] = absl::string_view(strings(i).data(), strings(i).size());
    // Sorted by each string's first 8 bytes as a big-endian integer (zero-padded), the whole strings compared only
    // where those tie: most comparisons are one integer compare on contiguous memory.
    struct Item {
      uint64_t prefix;
      int64_t index;
    };
    std::vector<Item> order(n);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t prefix = 0;
      const size_t size = std::min<size_t>(view[i].size(), 8);
      for (size_t j = 0; j < size; ++j) prefix |= uint64_t(uint8_t(view[i][j])) << (56 - 8 * j);
      order[i] = {prefix, i};
    }
    std::sort(order.begin(), order.end(), [&view](const Item& a, const Item& b) {
      return a.prefix != b.prefix ? a.prefix < b.prefix : view[a.index] < view[b.index];
    });
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, input.shape(), &output));
    auto ranks = output->flat<int64_t>();
    int64_t rank = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (i == 0 || order[i].prefix != order[i - 1].prefix || view[order[i].index] != view[order[i - 1].index]) ++rank;
      ranks(order[i].index) = rank;
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("TmrStringRanks").Device(::tensorflow::DEVICE_CPU), StringRanksOp);

REGISTER_OP("TmrCheckCancelled").SetIsStateful().SetShapeFn(::tensorflow::shape_inference::NoOutputs);

class CheckCancelledOp : public OpKernel {
 public:
  explicit CheckCancelledOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    auto* cancellation = context->cancellation_manager();
    OP_REQUIRES(context, cancellation == nullptr || !cancellation->IsCancelled(),
                ::tensorflow::errors::Cancelled("the run was given up: its step is cancelled"));
  }
};

REGISTER_KERNEL_BUILDER(Name("TmrCheckCancelled").Device(::tensorflow::DEVICE_CPU), CheckCancelledOp);

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

// TmrJoinMatch(probe: K[n], build: K[m]) -> (entry: int64[n], start: int64[g + 1], rows: int64[r],
//                                            build_matched: bool[m], total: int64)
//   The matches of a join, without its rows: one table over the build keys (K: int32, int64 or string; a
//   DenseJoinTable where integer keys span at most 4 slots a row, else a JoinTable), then each probe row's entry: its one matching build row j >= 0, ~h for the h-th build key of
//   several rows (those rows, in row order, are rows[start[h] .. start[h + 1])), or INT64_MIN for none.
//   build_matched[j]: whether build row j matched a probe row; total: the rows of the output (with keep_probe, a
//   probe row without a match counts one; with keep_build, each unmatched build row).  The job checks `total`
//   against its memory budget before TmrJoinTake makes any row.
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

// POSIX files and memory maps for TmrReadRows and TmrWriteResult (included here, beside the kernels that use them).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tensorflow/core/framework/allocation_description.pb.h"

namespace tfmapreduce {

// Mapped rows: a batch that is its file's own pages, mapped read-only (no copy out of the page cache).
//
// A file truncated while mapped makes the pages it lost fault with SIGBUS, which would kill the worker.  The
// handler below maps a page of zeros over each such page of a batch's mapping instead and lets the batch go on:
// the run then fails at its check of the file's size (TmrReadRows with count 0 after the run: _readers.size_check),
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

// TmrWriteResult(path: string, value: T, offset: int64, total: int64)
//   Writes `value` (numbers of any type that copies as bytes, rank 1 to 6) into the existing file `path` (the
//   client's shared-memory file of a returned result: _shm.Staging.returned) as raw bytes after a header, so the
//   client maps them (_shm.read_returned) with no TensorProto made on either side.  A result made in `parts`
//   parts on several devices goes into one file: part `part` (of rows value.dim(0)) at rows [offset, offset +
//   rows) of the `total`, so that the client maps the parts' concatenation without copying them together.  Every
//   part sizes the file and writes the same header; the parts write disjoint bytes, in any order.
//
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
