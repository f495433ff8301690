// Seams between the CUDA backend (cuda_backend.cu: device, workspace, pointer checks) and the
// per-operation dispatch units (cuda_sample.cu with its per-dtype units, cuda_stash.cu). Host code only.
#ifndef DDS_SRC_CUDA_INTERNAL_H_
#define DDS_SRC_CUDA_INTERNAL_H_

#include <cuda_runtime.h>

#include "internal.h"
#include "sample/plan.h"

namespace dds {

struct CudaContext {
  dds_sampler_config config;
  int device = 0;
  int num_sms = 0;
  int cc_major = 0, cc_minor = 0;
  size_t smem_optin = 0;     // cudaDevAttrMaxSharedMemoryPerBlockOptin
  void* workspace = nullptr; // scratch sized at dds_create: max of the *_workspace_bytes below
  size_t workspace_bytes = 0;
  ksample::SamplePlanOverrides sample_overrides;  // none unless set through testing.h
};

// cuda_sample.cu. Arguments are validated and normalised by api.cpp (see Backend).
size_t cuda_sample_workspace_bytes(const dds_sampler_config& cfg);
dds_status cuda_sample(const CudaContext& ctx, const dds_sample_args& args, cudaStream_t stream);
// testing.h's sample_split_rows: synchronises the device, then copies the split records' flags.
dds_status cuda_sample_split_rows(const CudaContext& ctx, int32_t rows, int32_t* taken);

// cuda_stash.cu.
size_t cuda_stash_workspace_bytes(const dds_sampler_config& cfg);
// The stash's own region: the workspace's last bytes (its zero-at-rest counters live there).
size_t cuda_stash_region_bytes(const dds_sampler_config& cfg);
dds_status cuda_stash(const CudaContext& ctx, const dds_stash_args& args, cudaStream_t stream);

// cuda_decode.cu: decoder primitives.
size_t cuda_reveal_workspace_bytes(const dds_sampler_config& cfg);
dds_status cuda_reveal(const CudaContext& ctx, const dds_reveal_args& args, cudaStream_t stream);

// cuda_verify.cu: speculative draft verification (scratch included in the workspace).
size_t cuda_verify_workspace_bytes(const dds_sampler_config& cfg);
dds_status cuda_verify(const CudaContext& ctx, const dds_verify_args& args, cudaStream_t stream);

// Turns a failed launch (cudaGetLastError) into DDS_ERR_CUDA naming `fn`.
inline dds_status check_launch(const char* fn) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return fail(DDS_ERR_CUDA, "%s: kernel launch failed: %s (%s)", fn, cudaGetErrorName(e),
                cudaGetErrorString(e));
  return DDS_OK;
}

}  // namespace dds

#endif  // DDS_SRC_CUDA_INTERNAL_H_
