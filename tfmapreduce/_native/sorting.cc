// tfmapreduce's native kernels, sorting family: radix sorts and string ranks (see tmr.h).
//
// Its ops:
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
// TmrStringRanks(strings: string[n]) -> ranks: int64[n]
//   Each string's rank among the distinct strings in byte order (unsigned bytes, a prefix first, as numpy sorts
//   `S` arrays): equal strings get one rank, so the ranks sort as the strings do.

#include "tmr.h"

namespace tfmapreduce {

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

}  // namespace tfmapreduce
