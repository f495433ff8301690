// Dispatch of dds_stash_logprobs on the CUDA backend (kernels/stash.cuh).
//
// Workspace: the stash keeps its own region AFTER the sample operation's region
// [0, cuda_sample_workspace_bytes), so neither operation disturbs the other's zero-at-rest
// counters: [A, A + partials) the per-(row, chunk) partials, then [.., + 4 * max_rows) the per-row
// arrival counters (zeroed at dds_create, reset by the kernel after each use).
// (cuda_sample_workspace_bytes must therefore not call cuda_stash_workspace_bytes.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>

#include "cuda_internal.h"
#include "stash/stash.cuh"

namespace dds {
namespace {

struct Layout {
  int64_t partials_off, partial_cap, counters_off, total;
};

// A = where the stash region starts (the end of the sample operation's region).
Layout stash_layout(const dds_sampler_config& cfg, int64_t A) {
  Layout L;
  const int32_t W = cfg.max_stash_width;
  L.partial_cap = (int64_t)cfg.max_rows + (W <= 64 ? 8192 : 1024);
  L.partials_off = A;
  L.counters_off = A + L.partial_cap * stash::partial_bytes(W);
  L.total = L.counters_off + (int64_t)cfg.max_rows * 4;
  return L;
}

// smem1: v1's shared memory for this call. The grid is v1's (v1's kernel and shared memory in the
// occupancy query) also when v2 runs: the chunk choice depends on the grid, so both split the rows
// alike and write the same bits (v2's extra ~6 KB per CTA could only lower its own occupancy
// where a CTA needs ~100 KB, many thousand requests or a large num_top: then some of its CTAs
// wait for a slot, the kernel does not depend on them being resident).
template <typename T, bool COUNT, int MINB, int V2>
dds_status launch(const CudaContext& ctx, stash::Params P, int nwarps, size_t smem, size_t smem1,
                  cudaStream_t stream) {
  auto kern = stash::stash_kernel<T, COUNT, MINB, V2>;
  auto kern1 = stash::stash_kernel<T, COUNT, MINB, 0>;
  if (smem > 48 * 1024 || smem1 > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem);
    if (e == cudaSuccess && V2)
      e = cudaFuncSetAttribute(kern1, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1);
    if (e != cudaSuccess)
      return fail(DDS_ERR_CUDA, "dds_stash_logprobs: cudaFuncSetAttribute failed: %s",
                  cudaGetErrorString(e));
  }
  int occ = 0;
  cudaError_t e =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern1, nwarps * 32, smem1);
  if (e != cudaSuccess || occ < 1) {
    cudaGetLastError();
    occ = 1;
  }
  int grid = std::max(1, ctx.num_sms * occ);
  // No more warps than there could ever be items.
  const int64_t tiles = (P.V + stash::kTile - 1) / stash::kTile;
  const int64_t max_items = (int64_t)P.num_rows * std::max<int64_t>(1, tiles);
  grid = (int)std::min<int64_t>(grid, (max_items + nwarps - 1) / nwarps);
  kern<<<grid, nwarps * 32, smem, stream>>>(P);
  return check_launch("dds_stash_logprobs");
}

// Register cap of the kernel: 2 CTAs of 256 threads per SM (<= 128 registers). Measured on the
// H200 against 3 CTAs (<= 80 registers, which spills with two 16-bit tiles in flight): 2 is as fast
// or faster in every stash scenario of dds_bench (bf16 4096 x 262144: 1.16x vs 1.36x the floor at
// n = 5; f32 4096 x 32000: 1.28x vs 1.46x), see bench/RESULTS.md.
constexpr int kMinBlocks = 2;

template <typename T, int V2>
dds_status launch_mode(const CudaContext& ctx, const stash::Params& P, bool count, int nwarps,
                       size_t smem, size_t smem1, cudaStream_t stream) {
  return count ? launch<T, true, kMinBlocks, V2>(ctx, P, nwarps, smem, smem1, stream)
               : launch<T, false, kMinBlocks, V2>(ctx, P, nwarps, smem, smem1, stream);
}

template <typename T>
dds_status launch_dtype(const CudaContext& ctx, const stash::Params& P, bool count, int v2,
                        int nwarps, size_t smem, size_t smem1, cudaStream_t stream) {
  switch (v2) {
    case 1: return launch_mode<T, 1>(ctx, P, count, nwarps, smem, smem1, stream);
    case 2:  // mode 2 differs from v2 only in the 16-bit tile loads
      if constexpr (sizeof(T) == 2) return launch_mode<T, 2>(ctx, P, count, nwarps, smem, smem1, stream);
      else return launch_mode<T, 1>(ctx, P, count, nwarps, smem, smem1, stream);
    default: return launch_mode<T, 0>(ctx, P, count, nwarps, smem, smem1, stream);
  }
}

// DDS_STASH_V2=1 selects the v2 kernel (kernels/stash.cuh, stash_kernel<..., V2 = 1>: the
// request fields loaded with the keep flags and scanned in registers, top-n candidates merged into
// the list in batches by counting, the partial lists merged by rank after one round of loads);
// the same outputs as v1 for the same grid (byte-compared on the H200, ninth session, 14 shapes),
// faster on small problems (256 x 32000 bf16 1/16 kept n = 20 34.2 -> 23.9 us, 256 x 262144 f32
// n = 20 53.9 -> 41.3). Not the default: compute-sanitizer racecheck reported warp-level shared
// memory hazards (warnings) under v2 in 4 of the 5 stash test cases (one located, in the merge,
// since mended) and one test case failed under racecheck; v2 is slower on large 16-bit problems
// (ninth session, docs/device-runs.md). The one located hazard is mended, and the host
// emulation's race check (tests/emu/racecheck.sh: ThreadSanitizer, shuffles ordering no memory)
// finds none in v1 or v2 (tenth session); not yet re-run under racecheck on a device.
// DDS_STASH_V2=2: v2 without its 16-bit tile pipeline (v1's pair loads), the candidate default.
// Unset, empty or 0: v1; 2: mode 2; any other number: v2. Read once, at the first call.
int stash_v2_mode() {
  static const int mode = stash::v2_mode_of(std::getenv("DDS_STASH_V2"));
  return mode;
}

}  // namespace

size_t cuda_stash_workspace_bytes(const dds_sampler_config& cfg) {
  const int64_t A = ((int64_t)cuda_sample_workspace_bytes(cfg) + 255) & ~(int64_t)255;
  return (size_t)stash_layout(cfg, A).total;
}

dds_status cuda_stash(const CudaContext& ctx, const dds_stash_args& a, cudaStream_t stream) {
  // The workspace is max(sample, stash) bytes and the stash's total includes the sample region,
  // so the stash region is its last bytes (no need to ask the sample operation again here).
  const int64_t own = stash_layout(ctx.config, 0).total;
  const Layout L = stash_layout(ctx.config, (int64_t)ctx.workspace_bytes - own);
  if (ctx.workspace == nullptr || (int64_t)ctx.workspace_bytes < own)
    return fail(DDS_ERR_INTERNAL, "dds_stash_logprobs: workspace too small (%zu < %lld bytes)",
                ctx.workspace_bytes, (long long)own);
  const bool count = a.committed_tokens != nullptr || a.token_ids != nullptr;
  stash::Params P;
  P.V = ctx.config.vocab_size;
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
  P.out_tok = a.out_token_ids;
  P.out_val = a.out_logprobs;
  P.out_rank = a.out_ranks;
  P.req_status = a.request_status;
  unsigned char* ws = static_cast<unsigned char*>(ctx.workspace);
  P.partials = ws + L.partials_off;
  P.partial_bytes = stash::partial_bytes(a.num_top);
  P.partial_cap = (int32_t)L.partial_cap;
  P.counters = reinterpret_cast<int32_t*>(ws + L.counters_off);
  P.cum_bytes = (int32_t)stash::align16((int64_t)(a.num_requests + 1) * 4);
  P.warp_bytes = (int32_t)stash::warp_smem_bytes(a.num_top, count);
  const size_t optin = ctx.smem_optin ? ctx.smem_optin : 48 * 1024;
  const size_t static_smem = 64;
  if ((size_t)P.cum_bytes + P.warp_bytes + static_smem > optin)
    return fail(DDS_ERR_UNSUPPORTED,
                "dds_stash_logprobs: num_requests (%d) and num_top (%d) need more shared memory "
                "than the device has (%zu bytes)",
                a.num_requests, a.num_top, optin);
  int nwarps = (int)std::min<size_t>(stash::kMaxWarps,
                                     (optin - P.cum_bytes - static_smem) / P.warp_bytes);
  // v2 needs a little more shared memory per warp; it runs only where it keeps v1's warps per
  // CTA (the chunk choice depends on the number of warps: the same grid, the same outputs).
  const size_t smem1 = (size_t)P.cum_bytes + (size_t)nwarps * P.warp_bytes;
  int v2 = stash_v2_mode();
  if (v2) {
    const int64_t wb2 = stash::warp_smem_bytes_v2(a.num_top, count);
    const int64_t room = (int64_t)optin - P.cum_bytes - (int64_t)static_smem;
    if (room / wb2 >= nwarps) P.warp_bytes = (int32_t)wb2;
    else v2 = 0;
  }
  const size_t smem = (size_t)P.cum_bytes + (size_t)nwarps * P.warp_bytes;
  switch (a.dtype) {
    case DDS_DTYPE_F32: return launch_dtype<float>(ctx, P, count, v2, nwarps, smem, smem1, stream);
    case DDS_DTYPE_BF16:
      return launch_dtype<__nv_bfloat16>(ctx, P, count, v2, nwarps, smem, smem1, stream);
    default: return launch_dtype<__half>(ctx, P, count, v2, nwarps, smem, smem1, stream);
  }
}

}  // namespace dds
