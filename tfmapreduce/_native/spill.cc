// tfmapreduce's native kernels, spill family: what a worker does with its spill directory (see tmr.h).
//
// Its ops:
//
// TmrRemoveSpill(path: string) -> removed: int64
//   Removes the spill folder `path` on the task it runs on, with everything under it, and returns how many entries
//   it removed (0 where it is absent, or another task of the same disk removed it first).  TensorFlow's stock ops can write and read a file but remove none, so a
//   spilled job (_kinds/spill.py) frees its worker's disk with this op, after it succeeded or failed.  Refuses a
//   path whose last component does not start with "tfmapreduce-spill-": only a job's own spill folder is removed.

#include <filesystem>
#include <system_error>

#include "tmr.h"

namespace tfmapreduce {

REGISTER_OP("TmrRemoveSpill")
    .Input("path: string")
    .Output("removed: int64")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape);

class RemoveSpillOp : public OpKernel {
 public:
  explicit RemoveSpillOp(OpKernelConstruction* context) : OpKernel(context) {}

  void Compute(OpKernelContext* context) override {
    const std::string path(context->input(0).scalar<::tensorflow::tstring>()());
    const std::filesystem::path folder(path);
    OP_REQUIRES(context, folder.filename().string().rfind("tfmapreduce-spill-", 0) == 0,
                ::tensorflow::errors::InvalidArgument("TmrRemoveSpill removes a job's spill folder "
                                                      "(tfmapreduce-spill-...), not ", path));
    std::error_code error;
    const std::uintmax_t removed = std::filesystem::remove_all(folder, error);
    // Tasks that share a disk remove the same folder at once: one that finds it gone (or going) is done too.
    OP_REQUIRES(context, !error || error == std::errc::no_such_file_or_directory,
                ::tensorflow::errors::Internal("could not remove the spill folder ", path, ": ", error.message()));
    ::tensorflow::Tensor* out = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, ::tensorflow::TensorShape({}), &out));
    out->scalar<int64_t>()() = static_cast<int64_t>(removed == static_cast<std::uintmax_t>(-1) ? 0 : removed);
  }
};

REGISTER_KERNEL_BUILDER(Name("TmrRemoveSpill").Device(::tensorflow::DEVICE_CPU), RemoveSpillOp);

}  // namespace tfmapreduce
