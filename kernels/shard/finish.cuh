// Vocabulary-parallel kernels: the finish (finish_kernel: one warp per row; thread 0 finishes the
// row from the records, the warp writes the probabilities of the slice) and the per-request status
// bits (shard_status_kernel).
#ifndef DDS_KERNELS_SHARD_FINISH_CUH_
#define DDS_KERNELS_SHARD_FINISH_CUH_

#include "cta.cuh"

namespace dds {
namespace kshard {

// ------------------------------------------------------------------------------------------------
// Finish.
struct FinishSmem {
  RowCtx r;
  union {
    SmemBins bins;
    MergeBuf merge;
  } u;
  FinishState f;
  int warp_cnt[kWarps];
  int res, flag;
  long long keep;
};

// One warp per row: the finish is thread 0's per-row code on records (latency-bound), so small
// CTAs keep many rows in flight per SM; the warp pre-sums the bins / builds the candidate merge
// and writes the probs.
constexpr int kFinishThreads = 32;
template <int DT>
__global__ void __launch_bounds__(kFinishThreads) finish_kernel(const __grid_constant__ Call c) {
  __shared__ FinishSmem S;
  const int i = blockIdx.x;
  if (threadIdx.x == 0) {
    setup_row(c, i, true, &S.r);
    S.r.g = shard::global_stats(c, S.r.w);
    const KRule k = shard::k_rule_base_t<SmemMerge>(c, S.r.w, S.r.g, nullptr);  // only its kind
    S.flag = (k.radix && c.first_radix >= 0) ? 1 : k.cand ? 2 : 0;
  }
  __syncthreads();
  const int kind = S.flag;
  bool built = false;
  if (kind == 1) load_bins(c, S.r.w, shard::kRadixRounds, &S.u.bins);
  if (kind == 2) built = build_merge(c, S.r.w, &S.u.merge);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (built) {
      SmemMerge sm{S.u.merge.merged, S.u.merge.total, 0};
      S.f = shard::finish_core(c, S.r.w, S.r.g, S.u.bins, &sm);
    } else {
      shard::GatheredMerge gm{&c, &S.r.w, {}};
      S.f = shard::finish_core(c, S.r.w, S.r.g, S.u.bins, &gm);
    }
    if (S.f.empty && c.a.out.request_status)
      atomicOr(&c.a.out.request_status[S.r.w.req], (int)kReqEmptyRow);
    S.r.k = S.f.k;
    set_min_p_threshold(&S.r.k);
  }
  __syncthreads();
  if (!c.a.out.probs) return;
  cta_localize<DT>(c, &S.r, S.warp_cnt, &S.res, &S.flag, &S.keep);
  if (threadIdx.x == 0) S.f.k = S.r.k;
  __syncthreads();
  const int64_t base = (int64_t)i * c.a.out.probs_row_stride;
  const RowCtx& r = S.r;
  const FinishState& f = S.f;
  for_cols<DT>(c, r, [&](int32_t t, float l) {
    Col col;
    col.l = l;
    col.in0 = l > neg_inf();
    col.x = xf(l, r.greedy, r.invT);
    store_elt(c.a.out.probs, c.a.out.probs_dtype, base + t, shard::finish_prob_col(f, col, c.off + t));
  });
}

__global__ void shard_status_kernel(const __grid_constant__ Call c) {
  const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= c.a.num_requests) return;
  c.a.out.request_status[r] = shard::call_params(c, r).status;
}

}  // namespace kshard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_FINISH_CUH_
