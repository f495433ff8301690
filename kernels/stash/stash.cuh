// dds_stash_logprobs on CUDA: one kernel and its host launcher. Semantics: docs/sampling.md §7
// (the CPU backend's stash() is the oracle); design and figures: docs/cuda_stash.md.
//
// Kernel
//  * stash_kernel<T, COUNT, MASK> (kernel.cuh): the whole call in one persistent launch. Every CTA turns
//    the per-request keep flags into a prefix count of kept rows in shared memory (a request not
//    kept costs its flag and nothing more), so the work is a dense list of K kept rows. Each kept
//    row is cut into P contiguous chunks of 1024-token tiles (P chosen on the device from K and
//    the grid, so that a few kept rows still fill the GPU) and every (row, chunk) item is one
//    warp's: one HBM read of the chunk, 32 values per lane in registers per tile, and in the same
//    pass the running max and sum of exp(v - M) (fp32 within a tile, float64 across tiles), the
//    top-n candidates as order-preserving 64-bit keys in a sorted per-warp list (one register per
//    lane while it holds <= 32 keys), and for given ids the count of strictly greater values
//    (a histogram over the sorted given values). 16-bit logits stay packed; two tiles are loaded
//    before either is processed. With P > 1 each warp writes a partial to the workspace and bumps
//    a per-row counter; the last to arrive merges the partials (a k-way merge in shared memory
//    for n <= 32), writes the row and resets the counter (zero at rest: graph-safe, no memset).
//    T: float, __nv_bfloat16 or __half; COUNT: given ids (committed tokens or the requests' own
//    ids) are ranked; MASK: the call has allowed-token masks (the mask pass over each tile).
//
// Files: params.cuh (Params, constants, shared-memory and workspace layout), tile.cuh (value
// rule over kernels/common/row.h, keys, element and tile loads, the warp's sorted list), kernel.cuh (stash_kernel),
// launch.cuh (warps_per_cta, launch_stash: grid by the occupancy query, dtype dispatch).
#ifndef DDS_KERNELS_STASH_STASH_CUH_
#define DDS_KERNELS_STASH_STASH_CUH_

#include "launch.cuh"

#endif  // DDS_KERNELS_STASH_STASH_CUH_
