// Host side of dds_stash_logprobs: the CTA shape for a parameter block's shared memory, and
// launch_stash, which sizes the persistent grid by the occupancy query and queues the kernel on
// the caller's stream (the CUDA backend, src/cuda_stash.cu, and the host emulation, tests/emu,
// both call it).
#ifndef DDS_KERNELS_STASH_LAUNCH_CUH_
#define DDS_KERNELS_STASH_LAUNCH_CUH_

#include <stddef.h>

#include "../common/launch.cuh"
#include "kernel.cuh"

namespace dds {
namespace stash {

// Static shared memory of the kernel, with room to spare (scan_tmp: 32 bytes).
constexpr size_t kStaticSmem = 64;

// Warps per CTA for P's shared memory (P.cum_bytes for the kept-row prefix, then P.warp_bytes
// per warp) within `smem_optin` bytes per CTA: as many as fit, at most kMaxWarps; 0 when not even
// one warp fits.
inline int warps_per_cta(const Params& P, size_t smem_optin) {
  if ((size_t)P.cum_bytes + P.warp_bytes + kStaticSmem > smem_optin) return 0;
  const size_t w = (smem_optin - P.cum_bytes - kStaticSmem) / P.warp_bytes;
  return (int)(w < (size_t)kMaxWarps ? w : (size_t)kMaxWarps);
}

// One CTA per resident slot (num_sms x the occupancy of this kernel and shared memory), but no
// more warps than there could ever be items (every kept row cut into one item per tile at most).
template <typename T, bool COUNT, bool MASK>
inline cudaError_t launch_stash_k(const Params& P, int nwarps, int num_sms, cudaStream_t s) {
  auto kern = stash_kernel<T, COUNT, MASK>;
  const size_t smem = (size_t)P.cum_bytes + (size_t)nwarps * P.warp_bytes;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
  }
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, nwarps * 32, smem) != cudaSuccess ||
      occ < 1) {
    cudaGetLastError();
    occ = 1;
  }
  long long grid = (long long)num_sms * occ;
  if (grid < 1) grid = 1;
  const long long tiles = (P.V + kTile - 1) / kTile;
  const long long max_items = (long long)P.num_rows * (tiles > 1 ? tiles : 1);
  const long long max_grid = (max_items + nwarps - 1) / nwarps;
  if (grid > max_grid) grid = max_grid;
  launch_kernel(s, kern, (unsigned)grid, (unsigned)(nwarps * 32), smem, P);
  return cudaGetLastError();
}

// The one dtype dispatch of dds_stash_logprobs (kernels/common/dtype.h); nwarps from warps_per_cta.
// Given ids (committed tokens or the requests' own ids) select the counting kernel, masks the
// kernel with the mask pass.
template <typename T, bool COUNT>
inline cudaError_t launch_stash_m(const Params& P, int nwarps, int num_sms, cudaStream_t s) {
  return P.allowed != nullptr ? launch_stash_k<T, COUNT, true>(P, nwarps, num_sms, s)
                              : launch_stash_k<T, COUNT, false>(P, nwarps, num_sms, s);
}
inline cudaError_t launch_stash(int dtype, const Params& P, int nwarps, int num_sms,
                                cudaStream_t s) {
  const bool count = P.committed != nullptr || P.token_ids != nullptr;
  DDS_DISPATCH_DTYPE(dtype, DT, {
    using T = typename StashType<DT>::T;
    return count ? launch_stash_m<T, true>(P, nwarps, num_sms, s)
                 : launch_stash_m<T, false>(P, nwarps, num_sms, s);
  });
}

}  // namespace stash
}  // namespace dds

#endif  // DDS_KERNELS_STASH_LAUNCH_CUH_
