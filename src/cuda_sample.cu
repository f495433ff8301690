// Dispatch of dds_sample on the CUDA backend (placeholder until the kernels land).
#include "cuda_internal.h"

namespace dds {
size_t cuda_sample_workspace_bytes(const dds_sampler_config&) { return 0; }
dds_status cuda_sample(const CudaContext&, const dds_sample_args&, cudaStream_t) {
  return fail(DDS_ERR_UNSUPPORTED, "dds_sample: the CUDA kernels are not built yet");
}
}  // namespace dds
