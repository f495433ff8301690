// Filtered rows from candidate lists: row_pass_kernel (the streaming pass: block records and
// candidate lists) and cand_finish_kernel (a warp per row: finish_filtered on the merged lists,
// or the row handed to filter_kernel).
#ifndef DDS_KERNELS_SAMPLE_FILTERED_CUH_
#define DDS_KERNELS_SAMPLE_FILTERED_CUH_

#include "select.cuh"

namespace dds {
namespace ksample {

template <int DT>
__device__ __forceinline__ void filtered_outputs(const SampleParams& P, const Req& q, int row,
                                                 int token, int amax, float m2, float Ml, float m,
                                                 uint32_t kthr, int cid, float amin,
                                                 unsigned long long zf, long long ef, int nk,
                                                 double Zl, double El) {
  RowInfo ri;
  ri.empty = 0;
  ri.token = token;
  ri.invT = q.invT;
  ri.kthr = kthr;
  ri.cid = cid;
  ri.amin = amin;
  const float lt = load_l<DT>(P, q, row, token);
  RowStats st;
  if (P.stats_guided) {
    st = row_stats(ri, 0, 0, Ml, log(Zl), Zl, El, lt, m2 != neg_inf(), m2);
  } else {
    const double Z = (double)zf / kMassScale;
    st = row_stats(ri, 2, 1, m, log(Z), Z, (double)ef / kMassScale, row::temper(lt, q.invT),
                   nk >= 2, row::temper(m2, q.invT));
  }
  write_row(P, row, token, amax, st, ri);
}

// Step 1 and 1b of the candidates' finish, from a row's block records alone, by a team
// (filter_top, then filter_lo; finish_filtered's warp re-reads the maximum's block between the
// two; every CTA of split_finish_kernel calls both with its 8 warps): every result is exact
// (maxima, first argmax, runner-up, counts), so any team and order give the same values:
//  1. the row maximum t (first block, or first column with the pass's top-2 records; runner-up),
//     U = the largest list bound Ul: every finite column outside the lists has l < Ul, so
//     a <= Ua; complete: no such column; the min-p threshold amin (a >= amin is kept: m only);
//  1b. a lower bound lo on the kept values: with top-k, the k-th largest block maximum (k
//     distinct columns reach it, so every kept value does), rounded down to the 12 high bits of
//     its key (12 count passes over keys in shared memory, `keys`: nblocks words); with min-p
//     alone (no top-k or top-p), amin. Candidates below lo cannot be kept and leave S, and blocks
//     whose maximum is below lo are not read at all: on Gaussian 262144-column rows with top-k
//     50, S shrinks from ~1400 candidates to ~100 and the blocks read from ~256 to ~60. Every
//     decision is unchanged: with top-k, |S| >= k before iff after (the k largest of S all reach
//     lo), and the selection, masses and token only ever look at the kept set, which lies in S.
// A row without a finite column has t.m1 = -inf and no bounds. Both read the row's block records
// through R: RecsL2 (__ldcg of the records in global memory), or split_finish_kernel's copy of
// the fields they read in shared memory.
struct RecsL2 {
  const BlockRec* r;
  __device__ __forceinline__ float maxl(int b) const { return __ldcg(&r[b].maxl); }
  __device__ __forceinline__ float second(int b) const { return __ldcg(&r[b].second); }
  __device__ __forceinline__ int amax(int b) const { return __ldcg(&r[b].amax); }
  __device__ __forceinline__ float ea(int b) const { return __ldcg(&r[b].ea); }
};
struct FilterBounds {
  float Ua, amin, lo;
  bool complete;
  bool topk_on;  // top-k is on: 0 < k < V
};
// 1: t and Ul, in every thread of the team.
template <class Team, class R>
__device__ __forceinline__ void filter_top(const Team& team, const SampleParams& P, const R& recs, Top2& t,
                                           float& Ul) {
  const int nb = P.nblocks;
  t = Top2{neg_inf(), INT_MAX, neg_inf()};
  Ul = -FLT_MAX;
  for (int b = team.rank(); b < nb; b += Team::kSize) {
    const float m1 = recs.maxl(b);
    if (m1 == neg_inf()) continue;
    Top2 o{m1, P.pass_top2 ? recs.amax(b) : b, P.pass_top2 ? recs.second(b) : neg_inf()};
    t = top2_merge(t, o);
    Ul = fmaxf(Ul, recs.ea(b));
  }
  t = team_top2(team, t);
  Ul = team_max(team, Ul);
}
// The block records' mass outside the candidate list S of a top-p row without top-k (a warp:
// lane-strided over the blocks, then summed), in finish_filtered's order.
__device__ __forceinline__ double outside_mass(const BlockRec* recs, int nb, int lane, float invT, double md) {
  double zr = 0;
  for (int b = lane; b < nb; b += 32) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    const double sr = (double)__ldcg(&recs[b].sa);
    if (sr > 0) zr += sr * exp((double)row::temper(m1, invT) - md);
  }
  return warp_sumd(zr);
}
// A filtered row's guided statistics over its block records (a warp), relative to the row
// maximum Ml: Zl and El (guided_terms).
__device__ __forceinline__ void guided_sums(const BlockRec* recs, int nb, int lane, float Ml, double& Zl,
                                            double& El) {
  for (int b = lane; b < nb; b += 32) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 != neg_inf()) guided_terms(m1, __ldcg(&recs[b].sl), __ldcg(&recs[b].el), Ml, Zl, El);
  }
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
}
// 1 (continued) and 1b from m = row::temper(t.m1, invT) (t.m1 finite: a row with a finite column)
// and Ul: complete, Ua, amin and lo.
template <class Team, class R>
__device__ __forceinline__ FilterBounds filter_lo(const Team& team, const SampleParams& P, const Req& q,
                                                  const R& recs, unsigned* keys, float m, float Ul) {
  const int lane = team.lane;
  FilterBounds fb;
  const int nb = P.nblocks;
  const float invT = q.invT;
  fb.complete = !(Ul > -FLT_MAX);
  fb.Ua = fb.complete ? neg_inf() : row::temper(nextafterf(Ul, neg_inf()), invT);
  fb.amin = neg_inf();
  fb.lo = neg_inf();
  const bool topk_on = q.k > 0 && q.k < P.V;
  fb.topk_on = topk_on;
  if (q.minp > 0.f) {
    float x = 0.f;
    if (lane == 0) x = minp_threshold(m, (double)m, q.minp);
    fb.amin = __shfl_sync(0xffffffffu, x, 0);
  }
  if (topk_on && !fb.complete && nb <= kWBins * 3) {
    // (each thread reads only the keys it wrote)
    const int nfin = team_count(team, nb, [&](int b) {
      const float mb = recs.maxl(b);
      const bool fin = mb != neg_inf();
      keys[b] = fin ? fkey(mb) : 0u;
      return fin;
    });
    team.sync();
    if (q.k <= nfin) {
      uint32_t pre = 0;
      for (int bit = 31; bit >= 20; --bit) {
        const uint32_t cand = pre | (1u << bit);
        if (team_count(team, nb, [&](int b) { return keys[b] >= cand; }) >= q.k) pre = cand;
      }
      // (keys of finite values are >= fkey(-FLT_MAX) = 0x00800000; below it: no bound)
      if (pre >= 0x00800000u) fb.lo = row::temper(fkey_inv(pre), invT);
    }
    team.sync();  // every thread has read the keys before the caller reuses them
  } else if (!topk_on && !(q.p < 1.f) && q.minp > 0.f) {
    fb.lo = fb.amin;
  }
  return fb;
}

template <int DT>
__device__ __noinline__ void finish_filtered(const SampleParams& P, const Req& q, int row, int lane,
                                             unsigned* hist, unsigned long long* hm) {
  const int nb = P.nblocks;
  const int L = P.cand_cap;
  const BlockRec* recs = P.recs + (long long)row * nb;
  int2* cl = P.cand + (long long)row * nb * L;  // the row's lists; S is compacted to its front
  const float invT = q.invT;
  // 1 and 1b: the bounds from the block records (filter_top, filter_lo).
  Top2 t;
  float Ul;
  filter_top(WarpTeam{lane}, P, RecsL2{recs}, t, Ul);
  if (t.m1 == neg_inf()) {
    if (lane == 0) write_empty(P, row);
    return;
  }
  // (The block holding the maximum re-read for its first column and runner-up when the row pass
  // kept only block maxima.)
  if (!P.pass_top2) {
    const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
    t.i1 = tb.i1;
    t.m2 = fmaxf(t.m2, tb.m2);
  }
  const float Ml = t.m1;
  const int amax = t.i1;
  const float m = row::temper(Ml, invT);
  const double md = (double)m;
  const FilterBounds fb = filter_lo(WarpTeam{lane}, P, q, RecsL2{recs}, hist, m, Ul);
  const bool complete = fb.complete;
  const float Ua = fb.Ua;
  const bool topk_on = fb.topk_on;
  const float amin = fb.amin;
  const float lo = fb.lo;

  // 2. Compact S = {candidates with a > Ua and a >= lo} to the front of the row's list area
  // (block order; every write index <= its read index, and a chunk is read before it is written).
  int nS = 0;
  unsigned long long zout = 0;  // fixed-point mass of the candidates outside S (top-p, no top-k)
  // (with top-k the masses outside S are never used: Z1 is the kept top-k mass, or, when top-k is
  // off because k >= |K0|, the lists are complete and nothing lies outside S)
  const bool want_zout = q.p < 1.f && q.p > 0.f && !topk_on;
  // Non-empty 16-slot half-chunks of the lists, in slot order, as (half-chunk << 5) | entries,
  // in the bins' shared memory (hist and hm, free until the selection); a warp-wide step takes two
  // (lanes 0-15 and 16-31: a Gaussian block lists ~14 columns, so one 32-slot chunk per step left
  // half the lanes idle, and the steps are the finish's longest loop: ncu 2026-11-29, 4096 x 262144
  // bf16 top-k, ~280 chunk steps and half of the kernel's instructions). Blocks whose maximum is
  // not above Ua hold nothing of S and are skipped unless the mass outside S is wanted. More
  // half-chunks than fit: every 32-slot chunk, one per step.
  constexpr int kHcCap = kWBins * 3;
  unsigned* hcl = hist;
  const int cpb = L / 32;  // 32-slot chunks per block list
  const int hpb = L / 16;  // half-chunks per block list
  int nh = 0;
  for (int b0 = 0; b0 < nb; b0 += 32) {
    const int b = b0 + lane;
    int n = 0;
    if (b < nb) {
      n = __ldcg(&recs[b].pad);
      if (!want_zout && n > 0) {
        const float ma = row::temper(__ldcg(&recs[b].maxl), invT);
        if (!(ma > Ua && ma >= lo)) n = 0;
      }
    }
    const int c = (n + 15) >> 4;
    const int incl = warp_incl_scan(c, lane);
    const int base = nh + incl - c;
    for (int p = 0; p < c && base + p < kHcCap; ++p)
      hcl[base + p] = ((unsigned)(b * hpb + p) << 5) | (unsigned)min(16, n - 16 * p);
    nh += __shfl_sync(0xffffffffu, incl, 31);
  }
  __syncwarp();
  const bool listed = nh <= kHcCap;
  const int nsteps = listed ? (nh + 1) >> 1 : nb * cpb;
  const int hl = lane & 15;
  const int hsel = lane >> 4;
  constexpr int kU = 8;  // steps in flight (loads independent of the writes)
  for (int s0 = 0; s0 < nsteps; s0 += kU) {
    int2 ev[kU];
    bool valid[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      valid[u] = false;
      ev[u] = make_int2(0, 0);
      const int si = s0 + u;
      if (si < nsteps) {
        long long slot = -1;
        if (listed) {
          const int hi = 2 * si + hsel;
          if (hi < nh) {
            const unsigned e = hcl[hi];
            if (hl < (int)(e & 31u)) slot = (long long)(e >> 5) * 16 + hl;
          }
        } else {
          const int b = si / cpb;
          const int cnt = __ldcg(&recs[b].pad) - (si - b * cpb) * 32;
          if (lane < cnt) slot = (long long)si * 32 + lane;
        }
        if (slot >= 0) {
          valid[u] = true;
          ev[u] = __ldcg(cl + slot);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float a = neg_inf();
      if (valid[u]) a = row::temper(__int_as_float(ev[u].y), invT);
      const bool in = valid[u] && a > Ua && a >= lo;
      if (want_zout && valid[u] && !in) zout += __double2ull_rn(exp((double)a - md) * kMassScale);
      const unsigned bal = __ballot_sync(0xffffffffu, in);
      if (in) cl[nS + __popc(bal & ((1u << lane) - 1u))] = ev[u];
      nS += __popc(bal);
    }
  }
  zout = warp_sum_of(zout);
  __syncwarp();
  __threadfence();
  const int2* S = cl;

  // 3. Thresholds.
  auto each = [&](auto g) {
    for_list(S, nS, lane, [&](int c, float l) {
      const float a = row::temper(l, invT);
      g(c, a, fkey(a));
    });
  };
  const FiltThr th = filter_thresholds(WarpTeam{lane}, P, q, each, nS, complete, m, md, amin, Ua, hist, hm, [&]() {
    return outside_mass(recs, nb, lane, invT, md) * kMassScale + (double)zout;
  });
  const uint32_t kthr = th.kthr;
  const int cid = th.cid;
  if (!th.ok || !th.inside) {
    // Not provable from the candidates: the filter kernel samples this row from the logits.
    if (lane == 0) {
      const int slot = atomicAdd(P.fb_count, 1);
      P.fb_rows[slot] = row;
    }
    return;
  }
  const Kept in_k{kthr, cid, amin};

  // 4. Kept sums in fixed point (order-independent): per block, Z, E = sum e (a - m), count.
  unsigned long long* km = P.kmass + (long long)row * nb;
  for (int b = lane; b < nb; b += 32) km[b] = 0ull;
  __syncwarp();
  __threadfence();
  const KeptSums ks = kept_list_sums(S, nS, lane, in_k, invT, md,
                                     [km](int b, unsigned long long ux) { atomicAdd(km + b, ux); });
  unsigned long long zf = ks.zf;
  long long ef = ks.ef;
  int nk = ks.nk;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    zf += __shfl_xor_sync(0xffffffffu, zf, o);
    ef += __shfl_xor_sync(0xffffffffu, ef, o);
  }
  nk = warp_sumi(nk);
  __syncwarp();
  __threadfence();

  // 5. Winning block (float64 scores), then the token among its kept columns (exact Gumbels).
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  double best;
  int bbest;
  best_block([km](int b) { return __ldcg(km + b); }, nb, lane, 32, md, q, pos, best, bbest);
  const int bt = list_token(WarpTeam{lane}, q, pos, S, nS, bbest, in_k, [&](float l) { return row::temper(l, invT); });
  const int token = (bt == INT_MAX) ? amax : bt;

  // 6. Statistics: processed over the kept set, or guided over K0 from the block records.
  double Zl = 0, El = 0;
  if (P.stats_guided) guided_sums(recs, nb, lane, Ml, Zl, El);
  if (lane == 0)
    filtered_outputs<DT>(P, q, row, token, amax, t.m2, Ml, m, kthr, cid, amin, zf, ef, nk, Zl, El);
}

// The state this call's finish kernels start from, zeroed by the row pass's first kZeroCtas CTAs
// (P.pass_zeroes; the workspace is not zero at rest): the fallback list's two counters, and the
// split finish's and the split fallback's per-row records when they run (at most kSplitMaxRows
// rows of ~24.6 KB: ~100 words per thread). A grid-stride loop over 32-bit words; the other
// CTAs pay one uniform branch instead of the loop's bounds (~20 instructions per warp).
constexpr int kZeroCtas = 64;
__device__ __forceinline__ void zero_finish_state(const SampleParams& P) {
  const int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  const int n = (int)(min(gridDim.x, (unsigned)kZeroCtas) * blockDim.x);
  if (t == 0) {
    *P.fb_count = 0;
    *P.fb_done = 0u;
    P.ovl[0] = 0u;
    P.ovl[1] = 0u;
  }
  if (P.split_finish) {
    unsigned* w = reinterpret_cast<unsigned*>(P.split_cnt);
    const int nw = P.num_rows * (int)(sizeof(SplitRowCnt) / sizeof(unsigned));
    for (int i = t; i < nw; i += n) w[i] = 0u;
  }
  if (P.split_filter) {
    unsigned* w = reinterpret_cast<unsigned*>(P.sf_rows);
    const int nw = P.num_rows * (int)(sizeof(SplitFiltRow) / sizeof(unsigned));
    for (int i = t; i < nw; i += n) w[i] = 0u;
  }
}

// MASK: as small_plain_kernel's (small.cuh).
template <int DT, bool MASK>
__global__ void __launch_bounds__(kRowWarps * 32, 4) row_pass_kernel(const __grid_constant__ SampleParams P) {
  if (P.pass_zeroes && blockIdx.x < kZeroCtas) zero_finish_state(P);
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  const int lane = threadIdx.x & 31;
  // Blocks per warp: 16-bit rows P.fbpw consecutive blocks (the request's parameters, ~175 of
  // the ~640 instructions of a block, read once for them all); f32 one, known at compile time.
  const int fbpw = DT == 0 ? 1 : P.fbpw;
  const int wpr = (P.nblocks + fbpw - 1) / fbpw;  // warps per row
  const long long gw = (long long)blockIdx.x * kRowWarps + (threadIdx.x >> 5);
  const long long total = (long long)P.num_rows * wpr;
  if (gw >= total) return;
  int row, wi;
  if (DT != 0 && total <= 0x7fffffffLL) {  // 32-bit division (the 64-bit one is a call)
    row = (int)((unsigned)gw / (unsigned)wpr);
    wi = (int)gw - row * wpr;
  } else {  // (f32: as measured, the register allocation of the 32-bit branch spills more)
    row = (int)(gw / wpr);
    wi = (int)(gw - (long long)row * wpr);
  }
  Req q = row_req<MASK>(P, row);
  // Unfiltered rows belong to plain_pass_kernel / plain_finish_*_kernel.
  if (!is_filtered(q, P.V)) return;
  // Per warp: its block's values while writing the list (each lane reads back only its own).
  __shared__ __align__(16) float s_stage[kRowWarps][kB];
  const int wid = threadIdx.x >> 5;
  // A min-p row without top-k or top-p keeps no column below M + ln(min_p) / invT for any block
  // maximum M (the row's is at least M): with lists over pairs of lanes (9-63 blocks), a block
  // first tries that floor, less a margin, as its tau (minp_floor).
  const bool floor_on = P.cand_lvl0 == 1 && q.minp > 0.f && !(q.p < 1.f) && !(q.k > 0 && q.k < P.V);
  const float ln_minp = floor_on ? logf(q.minp) : 0.f;
  // One block: lv = the lane's 32 values as loaded (whole aligned blocks unsanitised), its
  // maximum with NaN propagation: a NaN or +inf anywhere takes the exact rule (docs §2) in place,
  // as in plain_pass_kernel. The pass is ALU-bound, so no per-value argmax / runner-up work for
  // large grids: finish_filtered re-reads the one block holding the row's maximum (block_top2).
  auto block = [&](int blk, float (&lv)[32]) {
    float m1;  // this lane's maximum
    const float M = warp_block_max(lv, &m1);
    BlockRec rec = block_rec(M);
    if (P.pass_top2 && M != neg_inf()) {
      // Small grids (latency-bound): the block's runner-up (multiset) and first column of M here,
      // which saves the finish its re-read of the maximum's block. Exact either way.
      const Top2 tb = block_top2_regs<DT>(lv, blk, lane, M);
      rec.second = tb.m2;
      rec.amax = tb.i1;
    }
    constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
    if (M != neg_inf()) {
      // Candidate list: every column with l >= tau; tau from the lane maxima (see finish_filtered).
      const int L = P.cand_cap;
      int2* lst = P.cand + ((long long)row * P.nblocks + blk) * L;
      int lvl = P.cand_lvl0;
      // Rows of <= 2 blocks keep every finite column, except small top-k: the columns at or
      // above the smallest lane maximum (~120 of 1024 on Gaussian rows) settle it.
      if (lvl < 0 && q.k > 0 && q.k <= 64) lvl = 0;
      float tau;
      int n, base;
      unsigned msk;
      const float fl = floor_on ? minp_floor(M, q.invT, ln_minp) : -FLT_MAX;
      bool at_floor = fl > -FLT_MAX;  // the first try: the floor itself
      for (;;) {
        if (at_floor) {
          tau = fl;
        } else if (lvl < 0) {
          tau = -FLT_MAX;
        } else {
          float h = m1;
          for (int o = 1; o < (1 << lvl); o <<= 1) h = fmaxf(h, __shfl_xor_sync(0xffffffffu, h, o));
          tau = fmaxf(-warp_max(-h), fl);
        }
        msk = 0u;
        if (m1 >= tau) {
          if constexpr (DT != 0) {
            // bit e = (lv[e] >= tau): the sign of lv[e] - tau (exact: a difference of distinct
            // floats is never zero, x - x is +0, and no NaN is left here), shifted in by one
            // funnel shift per value. A zero tau is taken as -0: -0 - +0 is -0, which would
            // leave out a -0 column, but -0 >= +0 (the zeros are one value).
            const float t0 = tau == 0.f ? -0.f : tau;
#pragma unroll
            for (int e = 31; e >= 0; --e)
              msk = __funnelshift_l(__float_as_uint(__fsub_rn(lv[e], t0)), msk, 1);
            msk = ~msk;
          } else {  // (f32: the compare-and-select form measured faster)
#pragma unroll
            for (int e = 0; e < 32; ++e) msk |= (lv[e] >= tau) ? (1u << e) : 0u;
          }
        }
        const int cnt = __popc(msk);
        const int incl = warp_incl_scan(cnt, lane);
        n = __shfl_sync(0xffffffffu, incl, 31);
        base = incl - cnt;
        if (n <= L || lvl >= 5) break;
        if (at_floor) at_floor = false;
        else ++lvl;
      }
      if (n > L) {  // ties at the block maximum beyond the capacity: no list, bound l <= M
        n = 0;
        msk = 0u;
        tau = (M == FLT_MAX) ? -neg_inf() : nextafterf(M, FLT_MAX);
      }
      // Write the list: the lane's values staged in shared memory (no dynamic register indexing).
      if (msk) {
        constexpr int VEC = Elt<DT>::VEC;
        float4* st = reinterpret_cast<float4*>(s_stage[wid]);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          st[j * 32 + lane] = make_float4(lv[4 * j], lv[4 * j + 1], lv[4 * j + 2], lv[4 * j + 3]);
        do {
          const int e = __ffs(msk) - 1;
          msk &= msk - 1u;
          const int col = blk * kB + (e / VEC) * 32 * VEC + lane * VEC + (e % VEC);
          const float v = s_stage[wid][(e >> 2) * 128 + lane * 4 + (e & 3)];
          lst[base++] = make_int2(col, __float_as_int(v));
        } while (msk);
      }
      rec.ea = tau;
      rec.pad = n;
      // Top-p without top-k: the mass outside the list (Z1 of the finish).
      if (q.p < 1.f && q.p > 0.f && !(q.k > 0 && q.k < P.V)) {
        const float ma = row::temper(M, q.invT);
        const float invT = q.invT;
        float s = 0.f;
        if (invT == 1.f) {
#pragma unroll
          for (int e = 0; e < 32; ++e) {
            const float x = ex2((lv[e] - ma) * kLog2e);
            s += (lv[e] < tau) ? x : 0.f;
          }
        } else {
#pragma unroll
          for (int e = 0; e < 32; ++e) {
            const float x = ex2((row::temper(lv[e], invT) - ma) * kLog2e);
            s += (lv[e] < tau) ? x : 0.f;
          }
        }
        rec.sa = warp_sum(s);
      }
      if (P.want_stats && P.stats_guided) {
        float s = 0.f, en = 0.f;
        exp_terms<32>([&](int e) { return lv[e]; }, M, s, en);
        rec.sl = warp_sum(s);
        rec.el = warp_sum(en) * kLn2;
      }
    }
    // cand_finish_kernel finishes the row after this kernel.
    if (lane == 0) P.recs[(long long)row * P.nblocks + blk] = rec;
  };
  if constexpr (DT == 0) {
    float lv[32];
    load_block_l<DT, false>(P, q, row, wi, lane, lv);
    block(wi, lv);
  } else {
    const int bb0 = wi * fbpw, bb1 = min(bb0 + fbpw, P.nblocks);
    const bool fastrow = P.vec_ok != 0 && !q.guided;
    const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
    for (int blk = bb0; blk < bb1; ++blk) {
      float lv[32];
      if (fastrow && (blk + 1) * kB <= P.V) {
        uint4 cr[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j)
          cr[j] = *reinterpret_cast<const uint4*>(crow + blk * kB + j * 32 * VEC + lane * VEC);
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const T* ce = reinterpret_cast<const T*>(&cr[j]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = Elt<DT>::cvt(ce[e]);
        }
        ban_block<DT>(P, q, blk, lane, lv);
      } else {
        load_block_l<DT, false>(P, q, row, blk, lane, lv);
      }
      block(blk, lv);
    }
  }
}

// Filtered rows after row_pass_kernel: one warp per row merges the
// candidate lists and samples (finish_filtered).
template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32, 4) cand_finish_kernel(const __grid_constant__ SampleParams P) {
  __shared__ __align__(16) unsigned s_bins[kRowWarps][kWBins * 3];  // 256 counts + 256 u64 masses
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const int row = blockIdx.x * (int)(blockDim.x >> 5) + wid;  // (blockDim.x <= kRowWarps * 32)
  if (row >= P.num_rows) return;
  Req q = row_req(P, row);
  if (!is_filtered(q, P.V)) return;
  finish_filtered<DT>(P, q, row, lane, &s_bins[wid][0],
                      reinterpret_cast<unsigned long long*>(&s_bins[wid][kWBins]));
}

// The outputs of an unfiltered row once its maximum Ml (first column amax, runner-up m2), sums
// and token are known (one thread). lt: l of the token when the caller has it (the finishes
// loaded it to score the token), NaN to re-read it (l is never NaN).

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_FILTERED_CUH_
