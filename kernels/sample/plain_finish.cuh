// The finish of unfiltered rows after plain_pass_kernel: plain_finish_kernel (a CTA per row) and
// finish_plain_warp / plain_finish_warp_kernel (a warp per row), and their outputs (plain_outputs).
#ifndef DDS_KERNELS_SAMPLE_PLAIN_FINISH_CUH_
#define DDS_KERNELS_SAMPLE_PLAIN_FINISH_CUH_

#include "filtered.cuh"

namespace dds {
namespace ksample {

template <int DT>
__device__ __forceinline__ void plain_outputs(const SampleParams& P, const Req& q, int row,
                                              const Top2& t, float Ml, float Ma, int amax, int token,
                                              double Za, double Ea, double Zl, double El,
                                              float lt) {
  RowInfo ri;
  ri.empty = 0;
  ri.token = token;
  ri.invT = q.invT;
  ri.kthr = 0;
  ri.cid = 0;
  ri.amin = 0;
  double logprob = 0, conf = 1, margin = 1, ent = 0;
  if (P.stats_guided) {
    const double logS = log(Zl);
    float xt = 0.f;
    if (P.logprobs) xt = lt == lt ? lt : load_l<DT>(P, q, row, token);  // l of the token
    logprob = ((double)xt - (double)Ml) - logS;
    conf = exp(-logS);
    const double p2 = (t.m2 == neg_inf()) ? 0.0 : exp(((double)t.m2 - (double)Ml) - logS);
    margin = conf - p2;
    ent = log(Zl) - El / Zl;
    ri.mode = 0;
    ri.use_a = 0;
    ri.logS = logS;
    ri.M = Ml;
  } else if (q.greedy) {
    ri.mode = 1;
    ri.use_a = 0;
    ri.logS = 0;
    ri.M = 0.f;
  } else {
    const double logS = log(Za);
    float xt = 0.f;
    if (P.logprobs) xt = row::temper(lt == lt ? lt : load_l<DT>(P, q, row, token), q.invT);
    logprob = ((double)xt - (double)Ma) - logS;
    conf = exp(-logS);
    const double p2 = (t.m2 == neg_inf()) ? 0.0 : exp(((double)row::temper(t.m2, q.invT) - (double)Ma) - logS);
    margin = conf - p2;
    ent = log(Za) - Ea / Za;
    ri.mode = 0;
    ri.use_a = 1;
    ri.logS = logS;
    ri.M = Ma;
  }
  if (ent < 0) ent = 0;
  write_outputs(P, row, token, amax, logprob, conf, margin, ent);
  P.rowinfo[row] = ri;
}

// plain_finish_kernel: one CTA (kRowWarps warps) per unfiltered row, after plain_pass_kernel
// (stream order makes its block records visible; no counters). The row maximum and its first
// column (the block holding it re-read by warp 0: plain_pass_kernel keeps only block maxima and
// sums), the sums and block scores over the records, then the token in the winning block from its
// 1024 columns spread over the CTA (approximate Gumbels, exact float64 for the candidates).
struct FinSmem {
  Top2 t[kRowWarps];
  double bv[kRowWarps];
  int bi[kRowWarps];
  float bl[kRowWarps];  // l of each warp's best exact candidate
  float f[kRowWarps];
  Top2 top;
  int amax;  // first column of the row maximum (the last warp, block_top2)
  float m2;  // runner-up of the row
  double Z[4];
  double best;
  int bbest;
  // One chunk of kRowWarps * 32 blocks' terms (add_block_terms, split): w = exp(dm) and
  // inner = fma(dm, s, e) per block for a and for l; w < 0 marks a block without a finite column.
  double wa[kRowWarps * 32], sa[kRowWarps * 32], ia[kRowWarps * 32];
  double wl[kRowWarps * 32], sl[kRowWarps * 32], il[kRowWarps * 32];
};

__device__ __forceinline__ Top2 cta_top2(FinSmem& sm, Top2 v, int lane, int wid) {
  v = warp_top2(v);
  if (lane == 0) sm.t[wid] = v;
  __syncthreads();
  if (wid == 0) {
    Top2 w = lane < kRowWarps ? sm.t[lane] : Top2{neg_inf(), INT_MAX, neg_inf()};
    w = warp_top2(w);
    if (lane == 0) sm.top = w;
  }
  __syncthreads();
  return sm.top;
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32) plain_finish_kernel(const __grid_constant__ SampleParams P) {
  __shared__ FinSmem sm;
  const int row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
  constexpr int NT = kRowWarps * 32;
  Req q = row_req(P, row);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (is_filtered(q, P.V)) return;
  const int nb = P.nblocks;
  const BlockRec* recs = P.recs + (long long)row * nb;
  // The row maximum, the first block holding it, and the largest maximum of the other blocks
  // (= the maximum itself when two blocks hold it: runner-up of the multiset).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  for (int b = tid; b < nb; b += NT) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    t = top2_merge(t, Top2{m1, b, neg_inf()});
  }
  t = cta_top2(sm, t, lane, wid);
  if (t.m1 == neg_inf()) {
    if (tid == 0) write_empty(P, row);
    return;
  }
  const float Ml = t.m1;
  const bool need_a = !q.greedy;
  const bool sg = P.stats_guided != 0;
  const float Ma = need_a ? row::temper(Ml, q.invT) : 0.f;
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  // Sums relative to the global maxima in the warp finish's order (add_block_terms: lane L adds
  // blocks L, L + 32, ... with explicit fma, then warp_sumd), so that a row's statistics do not
  // depend on which finish ran: every thread computes one block's exp terms per chunk into shared
  // memory, warp 0 adds them in that order. Block scores: every thread, its blocks.
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  double best = 0;
  int bbest = INT_MAX;
  for (int c0 = 0; c0 < nb; c0 += NT) {
    const int b = c0 + tid;
    if (b < nb) {
      const float m1 = __ldcg(&recs[b].maxl);
      double wa = -1, wl = -1;
      // One side's terms (a: sa, ea against Ma; l: sl, el against Ml): w = exp(dm) returned.
      auto terms = [&](float m, float Mx, float s, float e, double* ss, double* ii) {
        const double dm = (double)m - (double)Mx;
        ss[tid] = (double)s;
        ii[tid] = fma(dm, (double)s, (double)e);
        return exp(dm);
      };
      if (m1 != neg_inf()) {
        if (need_a) {
          const float ma = row::temper(m1, q.invT);
          const float s = __ldcg(&recs[b].sa);
          wa = terms(ma, Ma, s, __ldcg(&recs[b].ea), sm.sa, sm.ia);
          const double score = ((double)ma + log((double)s)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
          argmax_merge(best, bbest, score, b);
        }
        if (sg) wl = terms(m1, Ml, __ldcg(&recs[b].sl), __ldcg(&recs[b].el), sm.sl, sm.il);
      }
      sm.wa[tid] = wa;
      sm.wl[tid] = wl;
    }
    __syncthreads();
    if (wid == 0) {
      for (int j = lane; j < NT && c0 + j < nb; j += 32) {
        const double wa = sm.wa[j], wl = sm.wl[j];
        if (wa >= 0) {  // (need_a: wa = -1 otherwise)
          Za = fma(sm.sa[j], wa, Za);
          Ea = fma(wa, sm.ia[j], Ea);
        }
        if (wl >= 0) {
          Zl = fma(sm.sl[j], wl, Zl);
          El = fma(wl, sm.il[j], El);
        }
      }
    }
    if (c0 + NT < nb) __syncthreads();  // the next chunk overwrites the terms
  }
  if (wid == kRowWarps - 1) {
    // The first column of the maximum and the runner-up: a re-read of the maximum's block, while
    // warp 0 adds the terms.
    const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
    if (lane == 0) {
      sm.amax = tb.i1;
      sm.m2 = fmaxf(t.m2, tb.m2);
    }
  }
  if (wid == 0) {
    Za = warp_sumd(Za);
    Ea = warp_sumd(Ea);
    Zl = warp_sumd(Zl);
    El = warp_sumd(El);
    if (lane == 0) {
      sm.Z[0] = Za;
      sm.Z[1] = Ea;
      sm.Z[2] = Zl;
      sm.Z[3] = El;
    }
  }
  warp_argmax(best, bbest);
  if (lane == 0) {
    sm.bv[wid] = best;
    sm.bi[wid] = bbest;
  }
  __syncthreads();
  if (tid == 0) {
    double bv = 0;
    int bi = INT_MAX;
    for (int w = 0; w < kRowWarps; ++w) argmax_merge(bv, bi, sm.bv[w], sm.bi[w]);
    sm.best = bv;
    sm.bbest = bi;
  }
  __syncthreads();
  Za = sm.Z[0];
  Ea = sm.Z[1];
  Zl = sm.Z[2];
  El = sm.Z[3];
  bbest = sm.bbest;
  int token = sm.amax;  // greedy: the argmax, whose l is Ml
  float lt = Ml;
  if (need_a) {
    // Token within the winning block: thread tid holds columns bbest*1024 + tid + k*NT.
    constexpr int PER = kB / NT;
    float sf[PER];
    float bf = neg_inf();
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int col = bbest * kB + tid + k * NT;
      sf[k] = (col < P.V) ? load_l<DT>(P, q, row, col) : neg_inf();
    }
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int col = bbest * kB + tid + k * NT;
      float v = neg_inf();
      if (sf[k] != neg_inf())
        v = row::temper(sf[k], q.invT) + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)col, kSaltToken));
      sf[k] = v;
      bf = fmaxf(bf, v);
    }
    bf = warp_max(bf);
    if (lane == 0) sm.f[wid] = bf;
    __syncthreads();
    bf = sm.f[0];
    for (int w = 1; w < kRowWarps; ++w) bf = fmaxf(bf, sm.f[w]);
    const float thr = bf - approx_margin(bf);
    double bv = 0;
    int bt = INT_MAX;
    float bl = 0.f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      // (thr may round to -inf at |a| ~ FLT_MAX: excluded columns stay out explicitly)
      if (sf[k] == neg_inf() || !(sf[k] >= thr)) continue;
      const int col = bbest * kB + tid + k * NT;
      const float l = load_l<DT>(P, q, row, col);
      const double v = (double)row::temper(l, q.invT) + gumbel(q.seed, q.step, pos, (uint32_t)col, kSaltToken);
      if (bt == INT_MAX || v > bv) bl = l;  // (columns ascend: a tie keeps the first)
      argmax_merge(bv, bt, v, col);
    }
    const int mine = bt;
    warp_argmax(bv, bt);
    const unsigned own = __ballot_sync(0xffffffffu, mine == bt && bt != INT_MAX);
    if (own) bl = __shfl_sync(0xffffffffu, bl, __ffs(own) - 1);
    if (lane == 0) {
      sm.bv[wid] = bv;
      sm.bi[wid] = bt;
      sm.bl[wid] = bl;
    }
    __syncthreads();
    if (tid == 0) {
      for (int w = 0; w < kRowWarps; ++w) {
        if (sm.bi[w] == INT_MAX) continue;
        if (bt == INT_MAX || sm.bv[w] > bv || (sm.bv[w] == bv && sm.bi[w] < bt)) {
          bv = sm.bv[w];
          bt = sm.bi[w];
          bl = sm.bl[w];
        }
      }
      token = bt;
      lt = bl;
    }
  }
  if (tid != 0) return;
  t.i1 = sm.amax;
  t.m2 = sm.m2;
  plain_outputs<DT>(P, q, row, t, Ml, Ma, t.i1, token, Za, Ea, Zl, El, lt);
}

// The same finish by one warp (plain_finish_warp_kernel: many rows, where one CTA per row would
// leave too few rows in flight).
template <int DT>
__device__ __noinline__ void finish_plain_warp(const SampleParams& P, const Req& q, int row, int lane) {
  const int nb = P.nblocks;
  const BlockRec* recs = P.recs + (long long)row * nb;
  // The row maximum, the first block holding it, and the largest maximum of the other blocks
  // (= the maximum itself when two blocks hold it: runner-up of the multiset).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  for (int b = lane; b < nb; b += 32) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    Top2 o{m1, b, neg_inf()};
    t = top2_merge(t, o);
  }
  t = warp_top2(t);
  if (t.m1 == neg_inf()) {
    if (lane == 0) write_empty(P, row);
    return;
  }
  {
    const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
    t.i1 = tb.i1;
    t.m2 = fmaxf(t.m2, tb.m2);
  }
  const float Ml = t.m1;
  const int amax = t.i1;
  const bool need_a = !q.greedy;
  const float Ma = need_a ? row::temper(Ml, q.invT) : 0.f;
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  // Sums relative to the global maxima, block scores.
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  double best = 0;
  int bbest = INT_MAX;
  // One block's sums; returns its a-maximum ma (-inf: no finite column).
  auto block_sum = [&](int b) -> float {
    return add_block_terms(recs, b, need_a, P.stats_guided != 0, q.invT, Ma, Ml, Za, Ea, Zl, El);
  };
  auto exact_score = [&](int b, float ma) {
    const double sa = (double)__ldcg(&recs[b].sa);
    return ((double)ma + log(sa)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
  };
  if (need_a) {
    // Block scores first in fp32 (approx_gumbel, __logf: |error| < 1e-4 + 2.5e-7 |score|); the
    // exact float64 score only for blocks within twice approx_margin of the best one (the block
    // the exact scores pick is always among them). Each lane keeps its best two fp32 scores; a
    // lane whose second one is also within the margin (rare) scores all its blocks exactly.
    Best2 bs{neg_inf(), neg_inf()};
    int b1 = -1;
    for (int b = lane; b < nb; b += 32) {
      const float ma = block_sum(b);
      if (ma == neg_inf()) continue;
      const float sa = __ldcg(&recs[b].sa);
      if (bs.add((ma + __logf(sa)) + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)b, kSaltBlock))))
        b1 = b;
    }
    const float s1 = bs.s1, s2 = bs.s2;
    const float bf = warp_max(s1);
    const float thr = bf - 2.f * approx_margin(bf);
    const bool all_exact = s2 != neg_inf() && !(s2 < thr);  // (thr NaN: every block)
    if (b1 >= 0 && !all_exact) {
      if (!(s1 < thr)) argmax_merge(best, bbest, exact_score(b1, row::temper(__ldcg(&recs[b1].maxl), q.invT)), b1);
    } else if (b1 >= 0) {
      for (int b = lane; b < nb; b += 32) {
        const float m1 = __ldcg(&recs[b].maxl);
        if (m1 != neg_inf()) argmax_merge(best, bbest, exact_score(b, row::temper(m1, q.invT)), b);
      }
    }
  } else {  // greedy: the sums only (statistics)
    for (int b = lane; b < nb; b += 32) block_sum(b);
  }
  Za = warp_sumd(Za);
  Ea = warp_sumd(Ea);
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
  int token = amax;
  float lt = Ml;  // l of the token (greedy: the argmax)
  if (need_a) {
    warp_argmax(best, bbest);
    // Token within the winning block: approximate Gumbels for all of its columns (loaded as the
    // pass loads a block: 16-byte loads where the row allows), exact float64 scores for the
    // candidates within the approximation margin of the best (a bit mask: no indexed array).
    float sf[32];
    load_block_l<DT, true>(P, q, row, bbest, lane, sf);
    float bf = neg_inf();
#pragma unroll 4
    for (int e = 0; e < 32; ++e) {
      float v = neg_inf();
      if (sf[e] != neg_inf())
        v = row::temper(sf[e], q.invT) +
            approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)col_of<DT>(bbest, lane, e), kSaltToken));
      sf[e] = v;
      bf = fmaxf(bf, v);
    }
    bf = warp_max(bf);
    const float thr = bf - approx_margin(bf);
    unsigned cand = 0;
#pragma unroll
    for (int e = 0; e < 32; ++e)  // (thr may round to -inf at |a| ~ FLT_MAX: -inf stays out)
      if (sf[e] != neg_inf() && sf[e] >= thr) cand |= 1u << e;
    double bv = 0;
    int bt = INT_MAX;
    float bl = 0.f;
    while (cand) {
      const int e = __ffs(cand) - 1;
      cand &= cand - 1;
      const int col = col_of<DT>(bbest, lane, e);
      const float l = load_l<DT>(P, q, row, col);
      const double v = (double)row::temper(l, q.invT) + gumbel(q.seed, q.step, pos, (uint32_t)col, kSaltToken);
      const int bt0 = bt;
      argmax_merge(bv, bt, v, col);
      if (bt != bt0) bl = l;
    }
    const int mine = bt;
    warp_argmax(bv, bt);
    const unsigned own = __ballot_sync(0xffffffffu, mine == bt && bt != INT_MAX);
    if (own) bl = __shfl_sync(0xffffffffu, bl, __ffs(own) - 1);
    token = bt;
    lt = bl;
  }
  if (lane != 0) return;
  plain_outputs<DT>(P, q, row, t, Ml, Ma, amax, token, Za, Ea, Zl, El, lt);
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32, 4) plain_finish_warp_kernel(const __grid_constant__ SampleParams P) {
  const int lane = threadIdx.x & 31;
  const long long row_ll = (long long)blockIdx.x * kRowWarps + (threadIdx.x >> 5);
  if (row_ll >= P.num_rows) return;
  const int row = (int)row_ll;
  Req q = row_req(P, row);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (is_filtered(q, P.V)) return;
  finish_plain_warp<DT>(P, q, row, lane);
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_PLAIN_FINISH_CUH_
