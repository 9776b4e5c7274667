// tfmapreduce's native kernels, runtime family: the engine's own ops (see tmr.h).
//
// Its ops:
//
// TmrCheckCancelled()
//   Fails (Cancelled) once the step it runs in is cancelled (its run given up, or failed elsewhere), else does
//   nothing: TensorFlow's executor never stops a step between kernels, so the engine runs one of these before
//   each op of a map function (see _engine/cancel.py), and a given-up run stops at its next op instead of running on.
//
// TmrWideSum(values: float[...]) -> sum: double
//   The sum of float32 values accumulated in float64, as tf.reduce_sum(tf.cast(values, tf.float64)) gives it to
//   within float64 rounding, without the float64 copy: the exact sums' fast path (_ops/numerics.py's exact_sum).

#include "tensorflow/core/framework/cancellation.h"
#include "tensorflow/core/util/work_sharder.h"
#include "tmr.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfmapreduce {

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

}  // namespace tfmapreduce
