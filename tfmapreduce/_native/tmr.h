// tfmapreduce's native kernels: TensorFlow custom ops compiled on the machine that runs them (see loader.py).
//
// The ops come in families, one source file each, each file opening with the catalogue of its ops:
//   words.cc    TmrWordCounts
//   sorting.cc  TmrStableArgsort, TmrSortValues, TmrSortPairs, TmrStringRanks
//   by_key.cc   TmrSelectByKey, TmrTopKByKey, TmrPartition, TmrSumsByKey
//   csv.cc      TmrDecodeCsv, TmrReadCsv
//   csv_scan.cc TmrScanCsv
//   joins.cc    TmrJoinMatch, TmrJoinTake
//   files.cc    TmrReadRows, TmrWriteResult
//   runtime.cc  TmrCheckCancelled, TmrWideSum
//   spill.cc    TmrRemoveSpill
// Each family is built into a library of its own, so a family that does not build leaves the others usable.  This
// header holds what several families share: the common includes, the names they use, and a few helpers.

#ifndef TFMAPREDUCE_NATIVE_TMR_H_
#define TFMAPREDUCE_NATIVE_TMR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"

namespace tfmapreduce {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TTypes;
using ::tensorflow::tstring;

// The shape function of ops whose every output is a vector of unknown length.
inline absl::Status VectorOutputs(::tensorflow::shape_inference::InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->Vector(c->UnknownDim()));
  return absl::OkStatus();
}

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

// The file no longer has `size` bytes: the error the client names the file by (see _io/files/text.py's RESIZED).
inline absl::Status Resized(const std::string& path, int64_t size) {
  return ::tensorflow::errors::InvalidArgument(path, " no longer has the size it had when the run started (", size,
                                               " bytes)");
}

// `n` bytes at `offset` into `out`, all there (the file no longer has `size` bytes otherwise).
inline absl::Status ReadExactly(const ::tensorflow::RandomAccessFile& file, const std::string& path, int64_t offset,
                                int64_t n, int64_t size, char* out) {
  absl::string_view got;
  absl::Status status = file.Read(static_cast<uint64_t>(offset), static_cast<size_t>(n), &got, out);
  if (!status.ok() && !absl::IsOutOfRange(status)) return status;
  if (static_cast<int64_t>(got.size()) != n) return Resized(path, size);
  if (got.data() != out) std::memcpy(out, got.data(), got.size());
  return absl::OkStatus();
}

}  // namespace tfmapreduce

#endif  // TFMAPREDUCE_NATIVE_TMR_H_
