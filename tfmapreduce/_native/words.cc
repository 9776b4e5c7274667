// tfmapreduce's native kernels, words family: the map-side combine of word_count (see tmr.h).
//
// Its ops:
//
// TmrWordCounts(text: string[...]) -> (words: string[k], counts: int64[k])
//   Splits every element of `text` on ASCII whitespace (space, \t, \n, \v, \f, \r: what Python's
//   bytes.split() and tf.strings.split split on) and counts each distinct word, in one pass: the
//   map-side combine of word_count without a string per word.  Words come out in first-seen order.

#include "tmr.h"

namespace tfmapreduce {

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

}  // namespace tfmapreduce
