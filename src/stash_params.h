// dds_stash_logprobs's arguments as the kernel's parameter block, and the stash's workspace
// layout: the one translation from the public API to kernels/stash (used by the CUDA backend,
// cuda_stash.cu, and the host emulation of the kernel, tests/emu). Arguments are validated by
// api.cpp before this.
//
// Workspace: the stash keeps its own region AFTER the scratch of every other operation (sample,
// verify, reveal: [0, the largest of their *_workspace_bytes)), so none of them disturbs its
// zero-at-rest counters: [A, A + partials) the per-(row, chunk) partials, then [.., + 4 * max_rows) the per-row
// arrival counters (zeroed at dds_create, reset by the kernel after each use).
#ifndef DDS_SRC_STASH_PARAMS_H_
#define DDS_SRC_STASH_PARAMS_H_

#include <cstdint>

#include "internal.h"
#include "stash/stash.cuh"

namespace dds {

struct StashLayout {
  int64_t partials_off, partial_cap, counters_off, total;
};

// A = where the stash region starts (past the other operations' scratch).
inline StashLayout stash_layout(const dds_sampler_config& cfg, int64_t A) {
  StashLayout L;
  const int32_t W = cfg.max_stash_width;
  L.partial_cap = (int64_t)cfg.max_rows + (W <= 64 ? 8192 : 1024);
  L.partials_off = A;
  L.counters_off = A + L.partial_cap * stash::partial_bytes(W);
  L.total = L.counters_off + (int64_t)cfg.max_rows * 4;
  return L;
}

// The parameter block; `ws` is the workspace that L describes.
inline stash::Params stash_params(const dds_stash_args& a, int V, unsigned char* ws,
                                  const StashLayout& L) {
  const bool count = a.committed_tokens != nullptr || a.token_ids != nullptr;
  stash::Params P;
  P.V = V;
  P.num_rows = a.num_rows;
  P.num_requests = a.num_requests;
  P.row_offsets = a.row_offsets;
  P.logits = a.logits;
  P.row_stride = a.row_stride;
  P.keep = a.keep;
  P.slots = a.slots;
  P.num_valid = a.num_valid;
  P.temperatures = a.temperatures;
  P.temperature = a.temperature;
  P.committed = a.committed_tokens;
  P.token_ids = a.token_ids;
  P.num_token_ids = a.num_token_ids;
  P.n = a.num_top;
  P.logits_mode = a.logits_mode;
  P.num_slots = a.num_slots;
  P.rows_per_slot = a.rows_per_slot;
  P.allowed = a.allowed_token_masks;
  P.allowed_stride = a.allowed_mask_stride;
  P.out_tok = a.out_token_ids;
  P.out_val = a.out_logprobs;
  P.out_rank = a.out_ranks;
  P.req_status = a.request_status;
  P.partials = ws + L.partials_off;
  P.partial_bytes = stash::partial_bytes(a.num_top);
  P.partial_cap = (int32_t)L.partial_cap;
  P.counters = reinterpret_cast<int32_t*>(ws + L.counters_off);
  P.cum_bytes = (int32_t)stash::align16((int64_t)(a.num_requests + 1) * 4);
  P.warp_bytes = (int32_t)stash::warp_smem_bytes(a.num_top, count);
  return P;
}

}  // namespace dds

#endif  // DDS_SRC_STASH_PARAMS_H_
