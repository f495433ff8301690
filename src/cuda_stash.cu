// Dispatch of dds_stash_logprobs on the CUDA backend (placeholder until the kernels land).
#include "cuda_internal.h"

namespace dds {
size_t cuda_stash_workspace_bytes(const dds_sampler_config&) { return 0; }
dds_status cuda_stash(const CudaContext&, const dds_stash_args&, cudaStream_t) {
  return fail(DDS_ERR_UNSUPPORTED, "dds_stash_logprobs: the CUDA kernels are not built yet");
}
}  // namespace dds
