// dds_sample_partial / dds_sample_finish on the CUDA backend (include/dds/dds_shard.h,
// docs/vocab_parallel.md §8): the validated call (src/shard.cpp builds it, src/shard_params.h
// translates the public arguments) handed to the kernels' launchers (kernels/shard/launch.cuh) on
// the sampler's device. No allocation, no host synchronisation, no workspace: graph-safe.
#include <cuda_runtime.h>

#include "cuda_internal.h"
#include "shard/launch.cuh"

namespace dds {
namespace {

// Makes the sampler's device current for the call and restores the caller's afterwards.
struct DeviceGuard {
  int prev = -1;
  cudaError_t err = cudaSuccess;
  explicit DeviceGuard(int dev) {
    cudaGetDevice(&prev);
    if (prev != dev) err = cudaSetDevice(dev);
  }
  ~DeviceGuard() {
    int cur = -1;
    cudaGetDevice(&cur);
    if (prev >= 0 && cur != prev) cudaSetDevice(prev);
  }
};

dds_status device_error(const char* fn, int device, cudaError_t e) {
  return fail(DDS_ERR_CUDA, "%s: cudaSetDevice(%d) failed: %s", fn, device, cudaGetErrorString(e));
}

dds_status launch_status(const char* fn, cudaError_t e) {
  if (e == cudaSuccess) return DDS_OK;
  return fail(DDS_ERR_CUDA, "%s: kernel launch failed: %s (%s)", fn, cudaGetErrorName(e),
              cudaGetErrorString(e));
}

}  // namespace

dds_status cuda_shard_partial(const shard::Call& c, int32_t round, void* record_out, int device,
                              dds_stream stream) {
  const char* fn = "dds_sample_partial";
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return device_error(fn, device, guard.err);
  return launch_status(fn, kshard::launch_partial(c, round, static_cast<unsigned char*>(record_out),
                                                  (cudaStream_t)stream));
}

dds_status cuda_shard_finish(const shard::Call& c, int device, dds_stream stream) {
  const char* fn = "dds_sample_finish";
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return device_error(fn, device, guard.err);
  return launch_status(fn, kshard::launch_finish(c, (cudaStream_t)stream));
}

}  // namespace dds
