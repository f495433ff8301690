// Host side of dds_sample: the workspace layout, the candidate-list shape, and launch_sample,
// which queues the kernels that a SamplePlan (plan.h) names, in stream order. No decision is made
// here that plan_sample does not make.
#ifndef DDS_KERNELS_SAMPLE_LAUNCH_CUH_
#define DDS_KERNELS_SAMPLE_LAUNCH_CUH_

#include "../common/launch.cuh"
#include "plan.h"
#include "probs.cuh"
#include "split_filter.cuh"
#include "split_row.cuh"

namespace dds {
namespace ksample {

// Candidate lists per block: capacity (a power of two) and first threshold level, by shape.
// nblocks <= 2: every finite column (the list is the row); <= 8 blocks: 256 entries, tau = the
// smallest lane maximum (all 32 lanes contribute); < 64 blocks: 64 entries, tau over pairs of
// lanes (>= 16 lanes contribute); else 64 entries, tau over groups of 4 lanes (>= 8; ~20
// columns of a Gaussian block are written, and the room to 64 keeps blocks from raising the
// level, which would raise the row's bound U: simulated on sigma-2 rows at V = 151936, the
// columns above U grow from ~390 to ~880 with 64 entries instead of 32).
inline int cand_cap_for(int V) {
  const int nb = (V + kB - 1) / kB;
  if (nb <= 2) {
    int c = 32;
    while (c < V && c < kB) c <<= 1;
    return c;
  }
  if (nb <= 8) return 256;
  return 64;
}
inline int cand_lvl0_for(int V) {
  const int nb = (V + kB - 1) / kB;
  if (nb <= 2) return -1;
  if (nb <= 8) return 0;
  return nb < 64 ? 1 : 2;
}

// The sampling scratch, carved from the sampler's workspace (sized at dds_create from the
// capacities). counters and the fallback counters are zeroed on the stream when a plan uses them.
struct SampleWorkspace {
  size_t counters, fb, recs, rowinfo, cand, kmass, fb_rows, split_cnt, split_s, sf_rows, sf_list, total;
  size_t sf_rows_n;  // rows with a split fallback record (SplitFiltRow)
  static size_t align(size_t x) { return (x + 255) & ~(size_t)255; }
  SampleWorkspace(int max_rows, int V) {
    const size_t rows = (size_t)(max_rows > 0 ? max_rows : 1);
    const size_t nb = (size_t)((V + kB - 1) / kB);
    counters = 0;
    fb = align(counters + rows * sizeof(int));
    recs = align(fb + 4 * sizeof(int));  // fb_count, fb_done, ovl[2]
    rowinfo = align(recs + rows * nb * sizeof(BlockRec));
    cand = align(rowinfo + rows * sizeof(RowInfo));
    kmass = align(cand + rows * nb * (size_t)cand_cap_for(V) * sizeof(int2));
    fb_rows = align(kmass + rows * nb * sizeof(unsigned long long));
    // split_finish_kernel runs for at most kSplitMaxRows rows (plan_sample)
    const size_t srows = rows < (size_t)kSplitMaxRows ? rows : (size_t)kSplitMaxRows;
    split_cnt = align(fb_rows + rows * sizeof(int));
    split_s = align(split_cnt + srows * sizeof(SplitRowCnt));
    sf_rows = align(split_s + srows * nb * (size_t)cand_cap_for(V) * sizeof(int2));
    // the split fallback (rows of more than kSplitFiltMinV columns, at most kSplitMaxRows rows)
    const size_t sfrows = V > kSplitFiltMinV ? srows : 0;
    sf_rows_n = sfrows;
    sf_list = align(sf_rows + sfrows * sizeof(SplitFiltRow));
    total = align(sf_list + sfrows * 2 * (size_t)kBigListCap * sizeof(int));
  }
  // Points P's scratch fields into the workspace at `base`.
  void bind(SampleParams& P, char* base) const {
    P.counters = reinterpret_cast<int*>(base + counters);
    P.recs = reinterpret_cast<BlockRec*>(base + recs);
    P.rowinfo = reinterpret_cast<RowInfo*>(base + rowinfo);
    P.cand = reinterpret_cast<int2*>(base + cand);
    P.cand_cap = cand_cap_for(P.V);
    P.cand_lvl0 = cand_lvl0_for(P.V);
    P.kmass = reinterpret_cast<unsigned long long*>(base + kmass);
    P.fb_rows = reinterpret_cast<int*>(base + fb_rows);
    P.fb_count = reinterpret_cast<int*>(base + fb);
    P.fb_done = reinterpret_cast<unsigned*>(base + fb + sizeof(int));
    P.ovl = reinterpret_cast<unsigned*>(base + fb + 2 * sizeof(int));
    P.split_cnt = reinterpret_cast<SplitRowCnt*>(base + split_cnt);
    P.split_s = reinterpret_cast<int2*>(base + split_s);
    P.sf_rows = reinterpret_cast<SplitFiltRow*>(base + sf_rows);
    P.sf_list = reinterpret_cast<int*>(base + sf_list);
  }
};

// The filter kernel's dynamic shared memory: FilterSmem, then the row (smem_row) or the long list
// (kBigListCap ids and l values; 1024 threads of 64 registers leave one CTA per SM anyway).
inline size_t filter_smem_bytes(int V, bool smem_row) {
  return sizeof(FilterSmem) + (smem_row ? (size_t)V * sizeof(float) : (size_t)kBigListCap * 8);
}

// The largest dynamic shared memory any launch of the filter kernel asks for. Set once per
// process and device, independent of the sampler's V (samplers of different V share the kernel).
template <int DT>
cudaError_t prepare_filter_kernel(int bytes) {
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < 4; ++i)  // every (MASK, SPLIT) instantiation the launch below may choose
    with_flags(i & 1, i & 2, [&](auto m, auto split) {
      if (e == cudaSuccess)
        e = cudaFuncSetAttribute(filter_kernel<DT, m, split>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    });
  return e;
}

// The instantiation of a small kernel for V: groups held for the last block (small_groups_for).
template <int DT, bool CTA, bool MASK>
inline void launch_small_plain(cudaStream_t s, const SampleParams& P) {
  const unsigned grid = CTA ? (unsigned)P.num_rows : (unsigned)((P.num_rows + kRowWarps - 1) / kRowWarps);
  switch (small_groups_for<DT>(P.V)) {
    case 0: launch_kernel(s, small_plain_kernel<DT, 0, CTA, MASK>, grid, kRowWarps * 32, 0, P); break;
    case 1: launch_kernel(s, small_plain_kernel<DT, 1, CTA, MASK>, grid, kRowWarps * 32, 0, P); break;
    default: launch_kernel(s, small_plain_kernel<DT, 32 / Elt<DT>::VEC, CTA, MASK>, grid, kRowWarps * 32, 0, P); break;
  }
}
template <int DT, bool CTA, bool MASK, bool JOINT>
inline void launch_small_filter(cudaStream_t s, const SampleParams& P) {
  const unsigned grid = (unsigned)P.num_rows;  // a row per CTA
  const unsigned nt = CTA ? kRowWarps * 32 : 32;
  switch (small_groups_for<DT>(P.V)) {
    case 0: launch_kernel(s, small_filter_kernel<DT, 0, CTA, MASK, JOINT>, grid, nt, 0, P); break;
    case 1: launch_kernel(s, small_filter_kernel<DT, 1, CTA, MASK, JOINT>, grid, nt, 0, P); break;
    default: launch_kernel(s, small_filter_kernel<DT, 32 / Elt<DT>::VEC, CTA, MASK, JOINT>, grid, nt, 0, P); break;
  }
}

// The kernels of one dtype (a template, not inline: the library instantiates each dtype in a
// translation unit of its own, src/cuda_sample_dtype.h).
template <int DT>
cudaError_t launch_sample_dt(SampleParams P, const SamplePlan& plan, cudaStream_t s) {
  // The plan's choices that kernels read.
  P.bpw = plan.bpw;
  P.fbpw = DT == 0 ? 1 : plan.fbpw;
  P.fuse_finish = plan.fuse_finish;
  P.direct_filter = plan.direct_filter;
  P.pass_top2 = plan.pass_top2;
  P.cf_wpc = plan.cf_wpc;
  P.small_plain = plan.small_plain;
  P.small_exact_all = plan.small_exact_all;
  P.small_cta = plan.small_cta;
  P.small_filter = plan.small_filter;
  P.small_filter_cta = plan.small_filter_cta;
  P.smem_row = plan.smem_row;  // the rows left to the filter kernel
  P.split_filter = plan.split_filter;
  P.sf_ctas = plan.sf_ctas;
  P.sf_cols = plan.sf_cols;
  P.split_finish = plan.split_finish;
  P.split_rank = plan.split_rank;
  P.split_smem = plan.split_smem;
  P.overlap = plan.split_overlap;
  P.ovl_n[0] = (unsigned)((long long)P.num_rows * (plan.split_ctas + plan.sf_ctas));
  P.ovl_n[1] = (unsigned)((long long)P.num_rows * plan.sf_ctas);
  // Counters are zero at rest only within one operation (the workspace is shared with
  // dds_verify_drafts), so a plan that uses them clears them on the stream: the fused plain
  // pass's per-row counters by a memset node, the filtered path's counters and per-row records
  // by row_pass_kernel, which runs before every kernel that reads them (no node of their own).
  P.pass_zeroes = plan.zero_fallback;
  // Launches with allowed-token masks take the kernels' MASK instantiations (plain pass, row
  // pass, small kernels, filter_kernel); the others run code without the mask's branches.
  const bool mask = P.allowed != nullptr;
  cudaError_t e = cudaSuccess;
  if (plan.zero_counters) e = cudaMemsetAsync(P.counters, 0, (size_t)P.num_rows * sizeof(int), s);
  if (e != cudaSuccess) return e;
  if (plan.run_plain && !plan.small_joint) {  // unfiltered rows (small_joint: small_filter_kernel's)
    if (plan.small_plain) {
      with_flags(plan.small_cta, mask, [&](auto cta, auto m) { launch_small_plain<DT, cta, m>(s, P); });
    } else {
      const long long warps = (long long)P.num_rows * ((P.nblocks + P.bpw - 1) / P.bpw);
      const unsigned grid = (unsigned)((warps + kRowWarps - 1) / kRowWarps);
      with_flags(plan.fuse_finish, mask, [&](auto fused, auto m) {
        launch_kernel(s, plain_pass_kernel<DT, fused, m>, grid, kRowWarps * 32, 0, P);
      });
      if (!plan.fuse_finish) {
        if (plan.finish_warp)
          launch_kernel(s, plain_finish_warp_kernel<DT>, (unsigned)((P.num_rows + kRowWarps - 1) / kRowWarps),
                        kRowWarps * 32, 0, P);
        else if (mask)
          launch_kernel(s, plain_finish_kernel<DT, true>, (unsigned)P.num_rows, kRowWarps * 32, 0, P);
        else
          launch_kernel(s, plain_finish_kernel<DT, false>, (unsigned)P.num_rows, kRowWarps * 32, 0, P);
      }
    }
  }
  if (plan.run_filter) {  // filtered rows
    if (plan.small_filter) {
      with_flags(plan.small_filter_cta, mask, [&](auto cta, auto m) {
        if (plan.small_joint) launch_small_filter<DT, cta, m, true>(s, P);
        else launch_small_filter<DT, cta, m, false>(s, P);
      });
    } else {
      if (!plan.direct_filter) {  // candidates from the streaming pass, a warp per row's finish
        const long long warps = (long long)P.num_rows * ((P.nblocks + P.fbpw - 1) / P.fbpw);
        launch_kernel(s, mask ? row_pass_kernel<DT, true> : row_pass_kernel<DT, false>,
                      (unsigned)((warps + kRowWarps - 1) / kRowWarps), kRowWarps * 32, 0, P);
        if (plan.split_spec)  // and the split fallback's histograms beside it (split_filter.cuh)
          launch_kernel(s, split_finish_hist_kernel<DT>,
                        (unsigned)((long long)P.num_rows * (plan.split_ctas + plan.sf_ctas)),
                        kRowWarps * 32, 0, P);
        else if (plan.split_finish)  // several CTAs per row (split_row.cuh)
          launch_kernel(s, split_finish_kernel<DT>, (unsigned)((long long)P.num_rows * plan.split_ctas),
                        kRowWarps * 32, 0, P);
        else
          launch_kernel(s, cand_finish_kernel<DT>, (unsigned)((P.num_rows + plan.cf_wpc - 1) / plan.cf_wpc),
                        plan.cf_wpc * 32, 0, P);
      }
      if (plan.split_filter) {  // wide top-p rows of the fallback: the first two stages split
        const unsigned g = (unsigned)((long long)P.num_rows * plan.sf_ctas);
        if (!plan.split_spec) launch_kernel(s, split_hist_kernel<DT>, g, kRowWarps * 32, 0, P);
        launch_kernel_overlapped(plan.split_overlap, s, split_bound_kernel<DT>, g, kRowWarps * 32,
                                 0, P);
      }
      with_flags(mask, plan.split_filter, [&](auto m, auto split) {
        launch_kernel_overlapped(plan.split_overlap, s, filter_kernel<DT, m, split>,
                                 (unsigned)plan.filter_grid, kFilterThreads,
                                 filter_smem_bytes(P.V, plan.smem_row), P);
      });
    }
  }
  if (P.out.probs) {
    const int chunks = (P.V + kProbsChunk - 1) / kProbsChunk;
    launch_kernel(s, probs_kernel<DT>, (unsigned)((long long)P.num_rows * chunks), 256, 0, P, chunks);
  }
  if (P.out.request_status) launch_kernel(s, status_kernel, (P.num_requests + 127) / 128, 128, 0, P);
  return cudaGetLastError();
}

// A build that compiles each dtype's kernels in a translation unit of its own defines
// DDS_SAMPLE_DTYPES_APART before including this header: the dispatchers below then instantiate
// no kernel, and each unit explicitly instantiates its dtype (src/cuda_sample_dtype.h).
#ifdef DDS_SAMPLE_DTYPES_APART
extern template cudaError_t launch_sample_dt<kDtypeF32>(SampleParams, const SamplePlan&, cudaStream_t);
extern template cudaError_t launch_sample_dt<kDtypeBF16>(SampleParams, const SamplePlan&, cudaStream_t);
extern template cudaError_t launch_sample_dt<kDtypeF16>(SampleParams, const SamplePlan&, cudaStream_t);
extern template cudaError_t prepare_filter_kernel<kDtypeF32>(int);
extern template cudaError_t prepare_filter_kernel<kDtypeBF16>(int);
extern template cudaError_t prepare_filter_kernel<kDtypeF16>(int);
#endif

inline cudaError_t prepare_sample_kernels() {
  const int bytes = (int)filter_smem_bytes(kSmemRowMax, true);
  cudaError_t e = cudaSuccess;
  for (int dtype : {kDtypeF32, kDtypeBF16, kDtypeF16}) {
    if (e != cudaSuccess) break;
    DDS_DISPATCH_DTYPE(dtype, DT, { e = prepare_filter_kernel<DT>(bytes); });
  }
  return e;
}

// The one dtype dispatch of dds_sample (kernels/common/dtype.h).
inline cudaError_t launch_sample(int dtype, const SampleParams& P, const SamplePlan& plan, cudaStream_t s) {
  DDS_DISPATCH_DTYPE(dtype, DT, { return launch_sample_dt<DT>(P, plan, s); });
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_LAUNCH_CUH_
