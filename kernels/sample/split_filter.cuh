// The split fallback: the first two stages of filter_kernel's wide top-p nucleus spread over
// several CTAs per row, for batches whose rows leave SMs idle (plan.split_filter). filter_kernel
// then finishes each such row from their results, with the outputs it computes on its own, bit
// for bit.
//
// Which rows: the fallback list's rows (those the candidates could not settle) of more than
// kSplitFiltMinV columns (filter_kernel re-reads them from the logits: a call the split takes does
// not hold its rows in shared memory, plan.h), top-p without top-k, with
// processed statistics (split_filter_ok). There filter_kernel (a) takes the row maximum from the
// block records, (b) finds the boundary 11-bit digit bd of the top-p select from a histogram of
// counts and 2^44 fixed-point masses over every finite column, (c) in a boundary pass adds the
// columns above bd (those min-p keeps) to its kept sums in 2^40 fixed point, per 1024-block and in
// all, and lists bd's columns, then (d) selects the other two digits and the tie cut on the list
// and adds the list's kept columns to the sums. Every sum of (b) and (c) is an integer, so the
// same integers come out of a grid that sums with integer atomics:
//  1. split_hist_kernel, a CTA per (fallback row, P.sf_cols columns): the CTA's histogram in
//     shared memory (radix_select's bins and mass words), added bin by bin into the row's
//     histogram in global memory; the row's last CTA (a counter per row) runs radix_select's
//     first-pass decision on it (radix_pick) and stores the digit's state, unless the digit has
//     more columns than wide_list_cap(V) (filter_kernel would not list them either; the row
//     then stays whole on filter_kernel);
//  2. split_bound_kernel, the same grid: (c) on its columns (boundary_terms, filter_kernel's
//     code), the per-block masses into kmass, the totals into the row's record, the digit's
//     columns into the row's list (a counter per row; the list is a set, its order is free);
//  3. filter_kernel (a CTA per row) resumes radix_select after its first pass from that state
//     and runs (d) on the list as after its own boundary pass (filter_row, `sfr`).
// The per-row records are zeroed by row_pass_kernel before stage 1 (zero_finish_state).
#ifndef DDS_KERNELS_SAMPLE_SPLIT_FILTER_CUH_
#define DDS_KERNELS_SAMPLE_SPLIT_FILTER_CUH_

#include "filter_cta.cuh"
#include "split_row.cuh"

namespace dds {
namespace ksample {

struct SplitFiltSmem {
  uint32_t cnt[kHistBins];  // this CTA's histogram (radix_select's layout), then the row's
  uint32_t mlo[kHistBins];
  uint32_t mhi[kHistBins];
  // radix_pick's results
  uint32_t sel_key;
  int sel_above_cnt, sel_eq_cnt;
  unsigned long long sel_above_mass, sel_eq_mass;
  double sel_target;
  float Ml, amin;
  unsigned long long w[3 * kRowWarps];  // cta_sum_u64 of three values
  unsigned long long seg_c[32], seg_m[32];  // radix_pick's segment sums
  int seg_ne[32];
};

// The CTA's fallback row and its share (P.sf_cols columns from part x P.sf_cols), if the
// split takes that row. Uniform over the CTA.
__device__ __forceinline__ bool split_filter_cta(const SampleParams& P, int& row, int& part, Req& q) {
  const int spr = P.sf_ctas;
  const int idx = (int)(blockIdx.x / (unsigned)spr);
  part = (int)(blockIdx.x - (unsigned)idx * (unsigned)spr);
  const int n = min((int)*reinterpret_cast<const volatile int*>(P.fb_count), P.num_rows);
  if (idx >= n) return false;
  row = __ldcg(P.fb_rows + idx);
  if (row < 0 || row >= P.num_rows) return false;  // never for a list of this call
  q = row_req(P, row);
  return split_filter_ok(P, q);
}

// Stage 1: the row's histogram of the first digit (key bits 31..21 of every finite column's a),
// counts and fixed-point masses; the row's last CTA picks the boundary digit.
// CTA `part` of the row's P.sf_ctas (split_filter_ok(P, q)).
template <int DT>
__device__ __forceinline__ void split_hist_cta(const SampleParams& P, SplitFiltSmem& sm, int row,
                                               int part, const Req& q) {
  constexpr int VEC = Elt<DT>::VEC;
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
  const int nb = P.nblocks;
  SplitFiltRow& st = P.sf_rows[row];
  if (wid == 0) {  // the row maximum of l: filter_row's, from the same block records
    const BlockRec* recs = P.recs + (long long)row * nb;
    float mx = neg_inf();
    for (int b = lane; b < nb; b += 32) mx = fmaxf(mx, __ldcg(&recs[b].maxl));
    mx = warp_max(mx);
    if (lane == 0) sm.Ml = mx;
  }
  for (int b = tid; b < kHistBins; b += blockDim.x) {
    sm.cnt[b] = 0;
    sm.mlo[b] = 0;
    sm.mhi[b] = 0;
  }
  __syncthreads();
  const float Ml = sm.Ml;
  if (Ml == neg_inf()) return;  // no finite column: filter_kernel writes the empty row
  const float invT = q.invT;
  const double md = (double)row::temper(Ml, invT);
  const RowSrc<DT> src = filter_src<DT>(P, q, row);
  const int c0 = part * P.sf_cols, c1 = min(P.V, c0 + P.sf_cols);
  constexpr int step = kRowWarps * 32 * VEC;
  for (int b0 = c0 + tid * VEC; b0 < c1; b0 += step * kUnroll) {
    float lv[kUnroll][VEC];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) src.group(b0 + k * step, lv[k]);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const int c = b0 + k * step + e;
        if (c >= c1 || lv[k][e] == neg_inf()) continue;
        const uint32_t kk = fkey(row::temper(lv[k][e], invT));
        atomicAdd(&sm.cnt[kk >> 21], 1u);
        mass_add(sm.mlo, sm.mhi, kk >> 21, topp_mass(kk, md));
      }
  }
  __syncthreads();
  for (int b = tid; b < kHistBins; b += blockDim.x) {
    if (sm.cnt[b] == 0u) continue;
    atomicAdd(&st.cnt[b], sm.cnt[b]);
    atomicAdd(&st.mass[b], mass_at(sm.mlo, sm.mhi, b));
  }
  if (!cta_count_done(&st.done, (unsigned)P.sf_ctas)) return;
  // The row's last CTA: radix_select's first-pass decision on the row's histogram.
  for (int b = tid; b < kHistBins; b += blockDim.x) {
    const unsigned long long mb = __ldcg(&st.mass[b]);
    sm.cnt[b] = __ldcg(&st.cnt[b]);
    sm.mlo[b] = (uint32_t)mb;
    sm.mhi[b] = (uint32_t)(mb >> 32);
  }
  __syncthreads();
  double target = 0.0;
  radix_pick(sm, kHistBins, 1, 0, target, (double)q.p, 0, 0ull, sm.seg_c, sm.seg_m, sm.seg_ne);
  __syncthreads();
  // (a digit too wide for its list: filter_kernel alone)
  if (sm.sel_eq_cnt > wide_list_cap(P.V)) return;
  unsigned long long* km = P.kmass + (long long)row * nb;  // stage 2's per-block masses
  for (int b = tid; b < nb; b += blockDim.x) km[b] = 0ull;
  if (tid == 0) {
    st.bd = sm.sel_key;
    st.eqn = sm.sel_eq_cnt;
    st.above_cnt = sm.sel_above_cnt;
    st.above_mass = sm.sel_above_mass;
    st.target = sm.sel_target;
    st.Ml = Ml;
    st.ok = 1;
  }
}
template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32) split_hist_kernel(const __grid_constant__ SampleParams P) {
  __shared__ __align__(16) SplitFiltSmem sm;
  int row, part;
  Req q;
  if (split_filter_cta(P, row, part, q)) split_hist_cta<DT>(P, sm, row, part, q);
}

// Stage 2: the boundary pass on the CTA's columns.
template <int DT>
__device__ __forceinline__ void split_bound_cta(const SampleParams& P, SplitFiltSmem& sm) {
  int row, part;
  Req q;
  if (!split_filter_cta(P, row, part, q)) return;
  SplitFiltRow& st = P.sf_rows[row];
  if (__ldcg(&st.ok) == 0) return;
  constexpr int VEC = Elt<DT>::VEC;
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
  const float invT = q.invT;
  const float m = row::temper(__ldcg(&st.Ml), invT);
  const double md = (double)m;
  const uint32_t bd = __ldcg(&st.bd);
  if (tid == 0) sm.amin = q.minp > 0.f ? minp_threshold(m, md, q.minp) : neg_inf();  // filter_row's
  __syncthreads();
  const float amin = sm.amin;
  const RowSrc<DT> src = filter_src<DT>(P, q, row);
  unsigned long long* km = P.kmass + (long long)row * P.nblocks;
  int* lid = P.sf_list + (long long)row * 2 * kBigListCap;
  float* ll = reinterpret_cast<float*>(lid + kBigListCap);
  auto inside = [&](int c, float l, uint32_t& key) {
    if (c >= P.V || l == neg_inf()) return false;
    key = fkey(row::temper(l, invT));
    return true;
  };
  // A warp per 32 x VEC consecutive columns (inside one 1024-block) at a time, as filter_kernel.
  constexpr int kCh = 32 * VEC;
  const int c0 = part * P.sf_cols;
  const int c1 = min((P.V + kCh - 1) / kCh * kCh, c0 + P.sf_cols);
  unsigned long long zf = 0;
  long long ef = 0;
  int nk = 0;
  for (int w0 = c0 + wid * kCh; w0 < c1; w0 += kRowWarps * kCh) {  // (warp-uniform)
    const int base = w0 + lane * VEC;
    float lv[VEC];
    src.group(base, lv);
    unsigned dmask = 0;  // the columns of digit bd among this lane's
    unsigned long long cs = boundary_terms(lv, base, bd, amin, m, inside, ef, nk, [&](int e) { dmask |= 1u << e; });
    cs = warp_sum_of(cs);
    if (lane == 0 && cs) {
      atomicAdd(km + (w0 >> 10), cs);
      zf += cs;
    }
    // The digit's columns to the row's list: a warp-wide offset, one atomic per warp.
    const int cnt = __popc(dmask);
    const int incl = warp_incl_scan(cnt, lane);
    const int total = __shfl_sync(0xffffffffu, incl, 31);
    if (total == 0) continue;
    int wbase = 0;
    if (lane == 31) wbase = (int)atomicAdd(&st.nlist, (unsigned)total);
    int j = __shfl_sync(0xffffffffu, wbase, 31) + incl - cnt;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (!((dmask >> e) & 1u)) continue;
      if (j < kBigListCap) {
        lid[j] = base + e;
        ll[j] = lv[e];
      }
      ++j;
    }
  }
  unsigned long long sums[3] = {zf, (unsigned long long)ef, (unsigned long long)nk};
  cta_sum_u64(sums, sm.w);
  zf = sums[0];
  ef = (long long)sums[1];
  nk = (int)sums[2];
  if (tid == 0) {
    if (zf) atomicAdd(&st.zf, zf);
    if (ef) atomicAdd(reinterpret_cast<unsigned long long*>(&st.ef), (unsigned long long)ef);
    if (nk) atomicAdd(&st.nk, nk);
  }
}
// plan.split_overlap: launched to start while the split finish's settled rows still run, it
// waits until every CTA of split_finish_hist_kernel has counted itself done (P.ovl[0]: the
// fallback list and the histograms are written), counts its own CTAs for filter_kernel (P.ovl[1]),
// and its last CTA waits for the finish's grid to complete (pdl_wait), so that this grid's
// completion implies the finish's for the launches after it.
template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32) split_bound_kernel(const __grid_constant__ SampleParams P) {
  __shared__ __align__(16) SplitFiltSmem sm;
  if (P.overlap) overlap_wait(P.ovl, P.ovl_n[0]);
  split_bound_cta<DT>(P, sm);
  if (P.overlap && overlap_signal(P.ovl + 1, P.ovl_n[1])) pdl_wait();
}

// The split finish and, beside it, stage 1 speculatively (plan.split_spec): CTAs [0, rows x
// split_ctas_for(nblocks)) are split_finish_kernel's, the next rows x P.sf_ctas CTAs build the
// first-digit histogram of every row the split fallback may take (split_filter_ok), before the
// finish has said which rows go to the fallback. Stage 1 reads only the logits and the block
// records, so its results are the same whenever it runs; split_bound_kernel and filter_kernel use
// them for the fallback list's rows only. With few rows most SMs idle while each row's last
// finish CTA runs, and the histogram takes them instead of a launch of its own after the finish.
template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32)
    split_finish_hist_kernel(const __grid_constant__ SampleParams P) {
  constexpr size_t kBytes =
      sizeof(SplitSmem) > sizeof(SplitFiltSmem) ? sizeof(SplitSmem) : sizeof(SplitFiltSmem);
  __shared__ __align__(16) unsigned char raw[kBytes];
  const unsigned nf = (unsigned)P.num_rows * (unsigned)split_ctas_for(P.nblocks);
  // plan.split_overlap: each CTA counts itself done for split_bound_kernel (P.ovl[0]) once what
  // that kernel reads is written: a row's last finish CTA at its verdict, before the rest of a
  // row that settles; the others as they end.
  bool counted = false;
  if (blockIdx.x < nf) {
    split_finish_cta<DT>(P, *reinterpret_cast<SplitSmem*>(raw), blockIdx.x, [&]() {
      if (counted) return;
      if (P.overlap) overlap_signal(P.ovl, P.ovl_n[0]);
      counted = true;
    });
  } else {
    const unsigned i = blockIdx.x - nf;
    const int row = (int)(i / (unsigned)P.sf_ctas);
    const int part = (int)(i - (unsigned)row * (unsigned)P.sf_ctas);
    if (row < P.num_rows) {
      const Req q = row_req(P, row);
      if (split_filter_ok(P, q))
        split_hist_cta<DT>(P, *reinterpret_cast<SplitFiltSmem*>(raw), row, part, q);
    }
  }
  if (P.overlap && !counted) overlap_signal(P.ovl, P.ovl_n[0]);
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_SPLIT_FILTER_CUH_
