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

#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfmapreduce {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
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

template <typename K>
class StableArgsortOp : public OpKernel {
 public:
  explicit StableArgsortOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    using U = std::make_unsigned_t<K>;
    constexpr int kBits = std::numeric_limits<U>::digits;
    constexpr int kDigit = 11;
    constexpr U kMask = (U(1) << kDigit) - 1;
    const Tensor& input = context->input(0);
    OP_REQUIRES(context, input.dims() == 1, ::tensorflow::errors::InvalidArgument("keys must be 1-D"));
    const auto keys = input.flat<K>();
    const int64_t n = keys.size();
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, TensorShape({n}), &output));
    auto order = output->flat<int64_t>();
    std::vector<U> key(n), key_next(n);
    std::vector<int64_t> index(n), index_next(n);
    U all_or = 0, all_and = ~U(0);
    for (int64_t i = 0; i < n; ++i) {
      key[i] = static_cast<U>(keys(i)) ^ (U(1) << (kBits - 1));  // signed order as unsigned
      index[i] = i;
      all_or |= key[i];
      all_and &= key[i];
    }
    for (int shift = 0; shift < kBits; shift += kDigit) {
      if ((((all_or ^ all_and) >> shift) & kMask) == 0) continue;  // every key has this digit
      std::array<int64_t, kMask + 2> start{};
      for (int64_t i = 0; i < n; ++i) ++start[((key[i] >> shift) & kMask) + 1];
      for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t to = start[(key[i] >> shift) & kMask]++;
        key_next[to] = key[i];
        index_next[to] = index[i];
      }
      std::swap(key, key_next);
      std::swap(index, index_next);
    }
    for (int64_t i = 0; i < n; ++i) order(i) = index[i];
  }
};

REGISTER_KERNEL_BUILDER(Name("TmrStableArgsort").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int32_t>("T"),
                        StableArgsortOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("TmrStableArgsort").Device(::tensorflow::DEVICE_CPU).TypeConstraint<int64_t>("T"),
                        StableArgsortOp<int64_t>);

}  // namespace tfmapreduce
