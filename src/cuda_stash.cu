// dds_stash_logprobs on the CUDA backend: the validated arguments as the kernel's parameter block
// (stash_params.h), the stash region of the workspace, and the kernel queued on the caller's
// stream (kernels/stash/launch.cuh). No allocation, no host synchronisation.
// (cuda_sample_workspace_bytes, cuda_verify_workspace_bytes and cuda_reveal_workspace_bytes must
// not call cuda_stash_workspace_bytes: the stash region follows their scratch, stash_params.h.)
#include "cuda_internal.h"
#include "stash_params.h"

namespace dds {

// The kernel's names for the status bits it writes (kernels include no dds/*.h).
static_assert(DDS_DTYPE_F32 == 0 && DDS_DTYPE_BF16 == 1 && DDS_DTYPE_F16 == 2,
              "launch_stash's dtype numbers");

size_t cuda_stash_workspace_bytes(const dds_sampler_config& cfg) {
  // The stash's counters are zero at rest, so its region lies past every other operation's
  // scratch (which starts at offset 0), whichever is the largest.
  size_t below = cuda_sample_workspace_bytes(cfg);
  for (size_t v : {cuda_verify_workspace_bytes(cfg), cuda_reveal_workspace_bytes(cfg)})
    if (v > below) below = v;
  const int64_t A = ((int64_t)below + 255) & ~(int64_t)255;
  return (size_t)stash_layout(cfg, A).total;
}

size_t cuda_stash_region_bytes(const dds_sampler_config& cfg) {
  return (size_t)stash_layout(cfg, 0).total;
}

dds_status cuda_stash(const CudaContext& ctx, const dds_stash_args& a, cudaStream_t stream) {
  // The workspace is the largest of the operations' totals and the stash's includes the others'
  // scratch, so the stash region is its last bytes (no need to ask the other operations here).
  const int64_t own = (int64_t)cuda_stash_region_bytes(ctx.config);
  const StashLayout L = stash_layout(ctx.config, (int64_t)ctx.workspace_bytes - own);
  if (ctx.workspace == nullptr || (int64_t)ctx.workspace_bytes < own)
    return fail(DDS_ERR_INTERNAL, "dds_stash_logprobs: workspace too small (%zu < %lld bytes)",
                ctx.workspace_bytes, (long long)own);
  const stash::Params P =
      stash_params(a, ctx.config.vocab_size, static_cast<unsigned char*>(ctx.workspace), L);
  const size_t optin = ctx.smem_optin ? ctx.smem_optin : 48 * 1024;
  const int nwarps = stash::warps_per_cta(P, optin);
  if (nwarps == 0)
    return fail(DDS_ERR_UNSUPPORTED,
                "dds_stash_logprobs: num_requests (%d) and num_top (%d) need more shared memory "
                "than the device has (%zu bytes)",
                a.num_requests, a.num_top, optin);
  const cudaError_t e = stash::launch_stash(a.dtype, P, nwarps, ctx.num_sms, stream);
  if (e != cudaSuccess)
    return fail(DDS_ERR_CUDA, "dds_stash_logprobs: kernel launch failed: %s (%s)",
                cudaGetErrorName(e), cudaGetErrorString(e));
  return DDS_OK;
}

}  // namespace dds
