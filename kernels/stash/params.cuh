// The stash kernel's parameter block, its constants, and the shared-memory and workspace layout
// that the host (launch.cuh, src/stash_params.h) and the kernel (kernel.cuh) agree on.
#ifndef DDS_KERNELS_STASH_PARAMS_CUH_
#define DDS_KERNELS_STASH_PARAMS_CUH_

#include <cuda_runtime.h>
#include <stdint.h>

#include "../common/status.h"  // the DDS_REQ_* bits

namespace dds {
namespace stash {

constexpr int kTile = 1024;           // tokens per tile (32 per lane)
constexpr int kMaxWarps = 8;          // warps per CTA at most
constexpr int kMinTilesPerItem = 2;   // a chunk of a kept row is at least 2 tiles
constexpr int kStageFloats = 32 * 33;  // padded [i][lane] staging of one tile
constexpr int kStageKeys = kStageFloats / 2;  // keys that fit the staging area (k-way merge)

struct Params {
  int32_t V;
  int32_t num_rows, num_requests;
  const int32_t* row_offsets;
  const void* logits;
  int64_t row_stride;
  const uint8_t* keep;
  const int32_t* slots;
  const int32_t* num_valid;
  const float* temperatures;
  float temperature;
  const int32_t* committed;
  const int32_t* token_ids;
  const int32_t* num_token_ids;
  int32_t n;  // num_top
  int32_t logits_mode;
  int32_t num_slots, rows_per_slot;
  const int32_t* allowed;  // allowed-token masks (kernels/common/allowed.h), or null
  int64_t allowed_stride;
  int32_t* out_tok;
  float* out_val;
  int32_t* out_rank;
  int32_t* req_status;
  unsigned char* partials;  // workspace: partial_cap partials of partial_bytes
  int64_t partial_bytes;
  int32_t partial_cap;
  int32_t* counters;  // workspace: [max_rows], zero at rest
  int32_t cum_bytes;  // shared memory for the kept-row prefix (aligned)
  int32_t warp_bytes; // shared memory per warp (aligned)
};

// Per-warp shared memory layout (host and device agree through these): the sorted key list, the
// staging area of one tile, and with counting (given ids) the given entries' values, positions,
// sorted values, histogram and counts.
__host__ __device__ inline int64_t align16(int64_t x) { return (x + 15) & ~(int64_t)15; }
__host__ __device__ inline int32_t list_len(int32_t n) { return n > 1 ? n : 1; }
__host__ __device__ inline int64_t warp_smem_bytes(int32_t n, bool count) {
  int64_t b = align16((int64_t)list_len(n) * 8) + kStageFloats * 4;
  if (count) b += align16((int64_t)5 * (n + 2) * 4);
  return align16(b);
}
// A partial of one (row, chunk) item in the workspace: S (double), M (float), the list, the counts.
__host__ __device__ inline int64_t partial_bytes(int32_t n) {
  return align16(16 + (int64_t)list_len(n) * 8 + (int64_t)(n + 1) * 4);
}

}  // namespace stash
}  // namespace dds

#endif  // DDS_KERNELS_STASH_PARAMS_CUH_
