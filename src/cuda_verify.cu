// Dispatch of dds_verify_drafts on the CUDA backend (kernels/verify.cuh): packs the validated
// arguments and the workspace scratch into the kernels' parameter block and queues three
// kernels on the caller's stream. No allocation, no host synchronisation: graph-capturable.
#include "cuda_internal.h"
#include "verify/verify.cuh"

namespace dds {

size_t cuda_verify_workspace_bytes(const dds_sampler_config& cfg) {
  return verify::workspace_bytes(cfg.vocab_size, cfg.max_rows, cfg.max_requests);
}

dds_status cuda_verify(const CudaContext& ctx, const dds_verify_args& a, cudaStream_t stream) {
  const dds_sampler_config& cfg = ctx.config;
  const size_t need = cuda_verify_workspace_bytes(cfg);
  if (ctx.workspace == nullptr || ctx.workspace_bytes < need)
    return fail(DDS_ERR_INTERNAL, "dds_verify_drafts: the CUDA workspace is smaller than needed");
  verify::Params p{};
  p.V = cfg.vocab_size;
  p.nblocks = (cfg.vocab_size + kBlockSize - 1) / kBlockSize;
  p.num_requests = a.num_requests;
  p.n = a.num_drafts;
  p.draft_counts = a.draft_counts;
  p.draft_tokens = a.draft_tokens;
  p.draft_logits = a.draft_logits;
  p.draft_stride = a.draft_row_stride;
  p.target_logits = a.target_logits;
  p.target_stride = a.target_row_stride;
  p.dtype = a.dtype;
  p.vals = rule::Values{nullptr,  0.f,         a.temperatures, a.temperature, a.top_ks,
                        a.top_k,  a.top_ps,    a.top_p,        a.min_ps,      a.min_p,
                        a.seeds,  a.seed,      a.steps,        a.step};
  p.banned = a.banned_token;
  p.allowed = a.allowed_token_masks;
  p.allowed_stride = a.allowed_mask_stride;
  p.accepted = a.accepted_counts;
  p.out_tokens = a.out_tokens;
  p.out_logprobs = a.out_logprobs;
  p.request_status = a.request_status;
  char* ws = static_cast<char*>(ctx.workspace);
  const size_t rows_bytes =
      (2 * (size_t)(cfg.max_rows > 0 ? cfg.max_rows : 1) * sizeof(verify::RowInfo) + 255) &
      ~(size_t)255;
  p.rows = reinterpret_cast<verify::RowInfo*>(ws);
  p.blocks = reinterpret_cast<verify::BlockSums*>(ws + rows_bytes);
  if (verify::launch_verify(p, stream) != cudaSuccess) return check_launch("dds_verify_drafts");
  return DDS_OK;
}

}  // namespace dds
