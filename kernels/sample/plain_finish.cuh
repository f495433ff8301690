// The finish of unfiltered rows after plain_pass_kernel: one algorithm over a team
// (plain_finish_row), run by a CTA per row (plain_finish_kernel) or a warp per row
// (finish_plain_warp: plain_finish_warp_kernel and the pass's fused finish), and its outputs
// (plain_outputs).
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
  RowStats st{0, 1, 1, 0};
  if (P.stats_guided) {
    float xt = 0.f;
    if (P.out.logprobs) xt = lt == lt ? lt : load_l<DT>(P, q, row, token);  // l of the token
    st = row_stats(ri, 0, 0, Ml, log(Zl), Zl, El, xt, t.m2 != neg_inf(), t.m2);
  } else if (q.greedy) {
    ri.mode = 1;
    ri.use_a = 0;
    ri.logS = 0;
    ri.M = 0.f;
  } else {
    float xt = 0.f;
    if (P.out.logprobs) xt = row::temper(lt == lt ? lt : load_l<DT>(P, q, row, token), q.invT);
    st = row_stats(ri, 0, 1, Ma, log(Za), Za, Ea, xt, t.m2 != neg_inf(),
                   row::temper(t.m2, q.invT));
  }
  write_row(P, row, token, amax, st, ri);
}

// The finish of an unfiltered row after plain_pass_kernel (stream order makes its block records
// visible; no counters), by a team (select.cuh): one warp (plain_finish_warp_kernel, and the pass's
// fused finish) or the kRowWarps warps of a CTA (plain_finish_kernel), the same algorithm and the
// same bits. Thread r of the team takes blocks r, r + size, ... and, in the winning block, the
// columns of load_block_l's layout (warp) or bbest * 1024 + r + k * size (CTA).
//  1. the row maximum and the first block holding it from the records, then that block re-read
//     for the first column of the maximum and the runner-up (block_top2; in the CTA by the last
//     warp, while warp 0 adds the sums);
//  2. the sums relative to the maxima (add_rec_terms: thread L of a warp adds blocks L, L + 32, ...
//     with explicit fma, then warp_sumd; the CTA computes every block's terms into shared memory,
//     256 blocks per chunk, and warp 0 adds them in that order), so a row's statistics do not
//     depend on the team;
//  3. the block scores: the warp scores in fp32 first (approx_gumbel, __logf: |error| < 1e-4 +
//     2.5e-7 |score|), the exact float64 score only for blocks within twice approx_margin of the
//     best (the block the exact scores pick is always among them; a lane whose second score is
//     that close too scores all its blocks exactly); the CTA, whose threads hold one block per
//     chunk, scores every block exactly in the sums' loop (the pre-selection would only add a CTA
//     reduction and a dependent exact step after the loop; the same winning block); each warp's
//     best block is handed over at the last chunk's barrier, and warp 1 merges them and stages
//     the winning block's l values in shared memory while warp 0 adds the sums;
//  4. the token in the winning block (team_token; the CTA reads the staged values, and its
//     result goes to warp 0 only) and the outputs (thread 0).
// A CTA-wide step costs every warp the instructions of its reductions: at 8 rows the CTA finish
// is a chain of barriers that all warps pass in step, so its time follows the instructions each
// warp executes (ncu, H100, bf16 151936 x 8: 15-18 cycles per issued instruction, about half of
// them waiting at barriers).
struct PlainSmem {
  TeamSmem team;
  Top2 t[kRowWarps];
  Top2 top;
  int amax;  // first column of the row maximum (the last warp, block_top2)
  float m2;  // runner-up of the row
  double Z[4];
  // One chunk of kRowWarps * 32 blocks' terms: w = exp(dm) and inner = fma(dm, s, e) per block for
  // a and for l; w < 0 marks a block without a finite column.
  double wa[kRowWarps * 32], sa[kRowWarps * 32], ia[kRowWarps * 32];
  double wl[kRowWarps * 32], sl[kRowWarps * 32], il[kRowWarps * 32];
  int bbest;     // the winning block (warp 1)
  float lw[kB];  // its l values, staged by warp 1 for the token search
};

template <class Team>
__device__ __forceinline__ Top2 team_top2(const Team& team, PlainSmem* sm, Top2 v) {
  v = warp_top2(v);
  if constexpr (Team::kCta) {
    const int lane = team.lane, wid = team.warp();
    if (lane == 0) sm->t[wid] = v;
    team.sync();
    if (wid == 0) {
      Top2 w = lane < kRowWarps ? sm->t[lane] : Top2{neg_inf(), INT_MAX, neg_inf()};
      w = warp_top2(w);
      if (lane == 0) sm->top = w;
    }
    team.sync();
    v = sm->top;
  }
  return v;
}

template <int DT, class Team>
__device__ __forceinline__ void plain_finish_row(const Team& team, PlainSmem* sm,
                                                 const SampleParams& P, const Req& q, int row) {
  constexpr int NT = Team::kSize;
  const int tid = team.rank(), lane = team.lane;
  const int nb = P.nblocks;
  const BlockRec* recs = P.recs + (long long)row * nb;
  // 1. The row maximum, the first block holding it, and the largest maximum of the other blocks
  // (= the maximum itself when two blocks hold it: runner-up of the multiset).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  for (int b = tid; b < nb; b += NT) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    t = top2_merge(t, Top2{m1, b, neg_inf()});
  }
  t = team_top2(team, sm, t);
  if (t.m1 == neg_inf()) {
    if (tid == 0) write_empty(P, row);
    return;
  }
  const int mblk = t.i1;
  if constexpr (!Team::kCta) {
    const Top2 tb = block_top2<DT>(P, q, row, mblk, t.m1, lane);
    t.i1 = tb.i1;
    t.m2 = fmaxf(t.m2, tb.m2);
  }
  const float Ml = t.m1;
  const bool need_a = !q.greedy;
  const bool sg = P.stats_guided != 0;
  const float Ma = need_a ? row::temper(Ml, q.invT) : 0.f;
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  // 2 and 3: the sums, and each thread's best two fp32 block scores (blocks ascending; the CTA:
  // each thread's best exact block score).
  Best2 bs{neg_inf(), neg_inf()};
  int b1 = -1;
  double best = 0;
  int bbest = INT_MAX;
  auto score = [&](int b, float ma) {  // block b's fp32 score, ma its a-maximum
    if (ma == neg_inf()) return;
    const float sa = __ldcg(&recs[b].sa);
    if (bs.add((ma + __logf(sa)) + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)b, kSaltBlock))))
      b1 = b;
  };
  if constexpr (Team::kCta) {
    const int wid = team.warp();
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
            const float sa = __ldcg(&recs[b].sa);
            wa = terms(ma, Ma, sa, __ldcg(&recs[b].ea), sm->sa, sm->ia);
            argmax_merge(best, bbest,
                         ((double)ma + log((double)sa)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock), b);
          }
          if (sg) wl = terms(m1, Ml, __ldcg(&recs[b].sl), __ldcg(&recs[b].el), sm->sl, sm->il);
        }
        sm->wa[tid] = wa;
        sm->wl[tid] = wl;
      }
      const bool last = c0 + NT >= nb;
      if (last && need_a) {  // each warp's best block, with the last chunk's terms
        warp_argmax(best, bbest);
        if (lane == 0) {
          sm->team.wv[wid] = best;
          sm->team.wi[wid] = bbest;
        }
      }
      team.sync();
      if (wid == 0) {
        for (int j = lane; j < NT && c0 + j < nb; j += 32) {
          const double wa = sm->wa[j], wl = sm->wl[j];
          if (wa >= 0) {  // (need_a: wa = -1 otherwise)
            Za = fma(sm->sa[j], wa, Za);
            Ea = fma(wa, sm->ia[j], Ea);
          }
          if (wl >= 0) {
            Zl = fma(sm->sl[j], wl, Zl);
            El = fma(wl, sm->il[j], El);
          }
        }
      }
      if (!last) team.sync();  // the next chunk overwrites the terms
    }
    static_assert(kRowWarps >= 3, "warp 0 sums, warp 1 stages, the last warp re-reads");
    if (wid == 1 && need_a) {
      // The winning block and its l values into shared memory, while warp 0 adds the terms: the
      // token search after the barrier reads them there (no global load on its path).
      float unused;
      merge_warp_bests<false>(sm->team, lane, best, bbest, unused);
      float lb[32];
      load_block_l<DT, true>(P, q, row, bbest, lane, lb);
#pragma unroll
      for (int k = 0; k < 32; ++k) sm->lw[col_of<DT>(bbest, lane, k) - bbest * kB] = lb[k];
      if (lane == 0) sm->bbest = bbest;
    }
    if (wid == kRowWarps - 1) {
      // The first column of the maximum and the runner-up: a re-read of the maximum's block,
      // while warp 0 adds the terms.
      const Top2 tb = block_top2<DT>(P, q, row, mblk, t.m1, lane);
      if (lane == 0) {
        sm->amax = tb.i1;
        sm->m2 = fmaxf(t.m2, tb.m2);
      }
    }
    if (wid == 0) {
      Za = warp_sumd(Za);
      Ea = warp_sumd(Ea);
      Zl = warp_sumd(Zl);
      El = warp_sumd(El);
      if (lane == 0) {
        sm->Z[0] = Za;
        sm->Z[1] = Ea;
        sm->Z[2] = Zl;
        sm->Z[3] = El;
      }
    }
    team.sync();
    if (need_a) bbest = sm->bbest;
    Za = sm->Z[0];
    Ea = sm->Z[1];
    Zl = sm->Z[2];
    El = sm->Z[3];
    t.i1 = sm->amax;
    t.m2 = sm->m2;
  } else {
    for (int b = tid; b < nb; b += NT) {
      const float ma = add_block_terms(recs, b, need_a, sg, q.invT, Ma, Ml, Za, Ea, Zl, El);
      if (need_a) score(b, ma);  // (greedy rows: the sums only, for the statistics)
    }
    Za = warp_sumd(Za);
    Ea = warp_sumd(Ea);
    Zl = warp_sumd(Zl);
    El = warp_sumd(El);
  }
  const int amax = t.i1;
  int token = amax;  // greedy: the argmax, whose l is Ml
  float lt = Ml;
  if (need_a) {
    // 3. The winning block (the CTA's exact scores: above).
    if constexpr (!Team::kCta) {
      auto exact_score = [&](int b, float ma) {
        const double sa = (double)__ldcg(&recs[b].sa);
        return ((double)ma + log(sa)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
      };
      const float s1 = bs.s1, s2 = bs.s2;
      const float bf = team_max(team, s1);
      const float thr = bf - 2.f * approx_margin(bf);
      const bool all_exact = s2 != neg_inf() && !(s2 < thr);  // (thr NaN: every block)
      if (b1 >= 0 && !all_exact) {
        if (!(s1 < thr)) argmax_merge(best, bbest, exact_score(b1, row::temper(__ldcg(&recs[b1].maxl), q.invT)), b1);
      } else if (b1 >= 0) {
        for (int b = tid; b < nb; b += NT) {
          const float m1 = __ldcg(&recs[b].maxl);
          if (m1 != neg_inf()) argmax_merge(best, bbest, exact_score(b, row::temper(m1, q.invT)), b);
        }
      }
      warp_argmax(best, bbest);
    }
    // 4. The token within it: the block's l values in registers (warp: as the pass loads a block,
    // 16-byte loads where the row allows; CTA: kB / NT columns per thread, from the values warp 1
    // staged).
    constexpr int PER = kB / NT;
    float lv[PER];
    if constexpr (Team::kCta) {
#pragma unroll
      for (int k = 0; k < PER; ++k) lv[k] = sm->lw[tid + k * NT];
    } else {
      load_block_l<DT, true>(P, q, row, bbest, lane, lv);
    }
    auto col_at = [&](int k) { return Team::kCta ? bbest * kB + tid + k * NT : col_of<DT>(bbest, lane, k); };
    token = team_token(team, q, pos, [&](auto f, auto) {
#pragma unroll 4
      for (int k = 0; k < PER; ++k) f(col_at(k), lv[k]);
    }, [](int, float) { return true; }, [invT = q.invT](float l) { return row::temper(l, invT); }, &lt,
                       false, false);  // (the token and lt: rank 0's, which writes the outputs)
  }
  if (tid != 0) return;
  plain_outputs<DT>(P, q, row, t, Ml, Ma, amax, token, Za, Ea, Zl, El, lt);
}

// plain_finish_kernel: a CTA (kRowWarps warps) per unfiltered row, for batches of few rows.
// MASK: the launch has allowed-token masks (as plain_pass_kernel's: without, the request's mask
// is a null constant and the re-reads of the winning blocks skip the mask's tests).
template <int DT, bool MASK>
__global__ void __launch_bounds__(kRowWarps * 32) plain_finish_kernel(const __grid_constant__ SampleParams P) {
  __shared__ PlainSmem sm;
  const int row = blockIdx.x;
  Req q = row_req<MASK>(P, row);
  if (is_filtered(q, P.V)) return;
  plain_finish_row<DT>(CtaTeam{(int)(threadIdx.x & 31), &sm.team}, &sm, P, q, row);
}

// The finish by one warp (plain_finish_warp_kernel, and plain_pass_kernel's fused finish).
template <int DT>
__device__ __noinline__ void finish_plain_warp(const SampleParams& P, const Req& q, int row, int lane) {
  plain_finish_row<DT>(WarpTeam{lane}, nullptr, P, q, row);
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32, 4) plain_finish_warp_kernel(const __grid_constant__ SampleParams P) {
  const int lane = threadIdx.x & 31;
  const long long row_ll = (long long)blockIdx.x * kRowWarps + (threadIdx.x >> 5);
  if (row_ll >= P.num_rows) return;
  const int row = (int)row_ll;
  Req q = row_req(P, row);
  if (is_filtered(q, P.V)) return;
  finish_plain_warp<DT>(P, q, row, lane);
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_PLAIN_FINISH_CUH_
