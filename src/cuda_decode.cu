// Dispatch of the decoder primitives on the CUDA backend (kernels/reveal.cuh).
// dds_verify_drafts is dispatched by cuda_verify.cu (kernels/verify.cuh).
#include "cuda_internal.h"
#include "reveal/reveal.cuh"

namespace dds {

size_t cuda_reveal_workspace_bytes(const dds_sampler_config& cfg) {
  return reveal::workspace_bytes(cfg.max_rows);
}

dds_status cuda_reveal(const CudaContext& ctx, const dds_reveal_args& a, cudaStream_t stream) {
  if (ctx.workspace == nullptr || ctx.workspace_bytes < reveal::workspace_bytes(ctx.config.max_rows))
    return fail(DDS_ERR_INTERNAL, "dds_reveal: the CUDA workspace is smaller than needed");
  reveal::Params p;
  p.num_rows = a.num_rows;
  p.num_requests = a.num_requests;
  p.row_offsets = a.row_offsets;
  p.positions = a.positions;
  p.scores = a.scores;
  p.eligible = a.eligible;
  p.policies = a.policies;
  p.policy = a.policy;
  p.counts = a.counts;
  p.count = a.count;
  p.steps_left = a.steps_left;
  p.thresholds = a.thresholds;
  p.threshold = a.threshold;
  p.factors = a.factors;
  p.factor = a.factor;
  p.position_temperatures = a.position_temperatures;
  p.position_temperature = a.position_temperature;
  p.entropy_bounds = a.entropy_bounds;
  p.entropy_bound = a.entropy_bound;
  p.seeds = a.seeds;
  p.seed = a.seed;
  p.steps = a.steps;
  p.step = a.step;
  p.canvas = a.canvas;
  p.canvas_stride = a.canvas_stride;
  p.canvas_length = a.canvas_length;
  p.tokens = a.tokens;
  p.mask_token = a.mask_token;
  p.eos_token = a.eos_token;
  p.reveal = a.reveal;
  p.num_revealed = a.num_revealed;
  p.finished = a.finished;
  p.request_status = a.request_status;
  p.ws_key = static_cast<uint64_t*>(ctx.workspace);
  p.ws_tie = p.ws_key + (ctx.config.max_rows > 0 ? ctx.config.max_rows : 1);
  if (reveal::launch_reveal(p, stream) != cudaSuccess) return check_launch("dds_reveal");
  return DDS_OK;
}

}  // namespace dds
