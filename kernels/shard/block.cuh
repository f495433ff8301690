// Vocabulary-parallel kernels: the block pass (one warp per 1024-id block part of the slice: block
// maximum, multiset second, first argmax, fp32 exp sums), the ordered re-scans that find the ids of
// the runners-up, the token winner of a block part (approximate fp32 Gumbels, exact float64 ones
// within the margin), and a rank's sampler share from the block records (make_share_cta).
#ifndef DDS_KERNELS_SHARD_BLOCK_CUH_
#define DDS_KERNELS_SHARD_BLOCK_CUH_

#include "cta.cuh"

namespace dds {
namespace kshard {

// ------------------------------------------------------------------------------------------------
// Block pass: one warp per 1024-id block part.
struct BlkRec {
  float m1;   // STATS: max l; KEPT: max a over the block's kept columns (-inf: none)
  float sec;  // STATS: multiset second of l
  int amax;   // STATS: first column with l == m1
  int cnt;    // columns in the set
  float sl, el;  // STATS: sum e, sum e (l - m1), e = exp(l - m1)
  float sa, ea;  // sum e, sum e (a - ma), e = exp(a - ma), ma = max a of the block's set
};

struct Geo {  // the slice's blocks
  int32_t b_first, nblk;
};
__device__ __forceinline__ Geo geo(const Call& c) {
  Geo g;
  g.b_first = c.off / kB;
  g.nblk = (c.off + c.Vs - 1) / kB - g.b_first + 1;
  return g;
}
__device__ __forceinline__ void part_range(const Call& c, int32_t blk, int32_t* lo, int32_t* hi,
                                           bool* full) {
  const int32_t blo = blk * kB, bhi = blo + kB < c.V ? blo + kB : c.V;
  *lo = blo > c.off ? blo : c.off;
  *hi = bhi < c.off + c.Vs ? bhi : c.off + c.Vs;
  *full = *lo == blo && *hi == bhi;
}


// The 32 l values of this lane for block blk (columns outside the slice: -inf).
template <int DT>
__device__ __forceinline__ void load_block(const Call& c, const RowCtx& r, int blk, int lane,
                                           float (&lv)[32]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  const T* cr = static_cast<const T*>(r.crow);
  const T* ur = static_cast<const T*>(r.urow);
  const int32_t b0 = blk * kB, t0 = b0 - c.off;
  const row::Ban ban = ban_of(c.a);
  const bool inside = b0 >= c.off && b0 + kB <= c.off + c.Vs;
  const bool vec = inside && ((uintptr_t)(cr + t0) % 16 == 0) &&
                   (!r.guided || (uintptr_t)(ur + t0) % 16 == 0);
  if (vec) {
    uint4 cv[NJ];
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      cv[j] = *reinterpret_cast<const uint4*>(cr + t0 + j * 32 * VEC + lane * VEC);
    if (r.guided) {
      uint4 uv[NJ];
#pragma unroll
      for (int j = 0; j < NJ; ++j)
        uv[j] = *reinterpret_cast<const uint4*>(ur + t0 + j * 32 * VEC + lane * VEC);
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const T* ce = reinterpret_cast<const T*>(&cv[j]);
        const T* ue = reinterpret_cast<const T*>(&uv[j]);
#pragma unroll
        for (int q = 0; q < VEC; ++q)
          lv[j * VEC + q] = row::make_l(Elt<DT>::cvt(ce[q]), Elt<DT>::cvt(ue[q]), true, r.gs,
                                   b0 + j * 32 * VEC + lane * VEC + q, ban);
      }
    } else {
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const T* ce = reinterpret_cast<const T*>(&cv[j]);
#pragma unroll
        for (int q = 0; q < VEC; ++q)
          lv[j * VEC + q] = row::make_l(Elt<DT>::cvt(ce[q]), 0.f, false, 0.f,
                                   b0 + j * 32 * VEC + lane * VEC + q, ban);
      }
    }
    return;
  }
  const int32_t lo = b0 > c.off ? b0 : c.off;
  const int32_t hi = (b0 + kB < c.off + c.Vs) ? b0 + kB : c.off + c.Vs;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const int col = col_of<DT>(blk, lane, e);
    float v = neg_inf();
    if (col >= lo && col < hi) {
      const float cv1 = Elt<DT>::cvt(cr[col - c.off]);
      const float u = r.guided ? Elt<DT>::cvt(ur[col - c.off]) : 0.f;
      v = row::make_l(cv1, u, r.guided, r.gs, col, ban);
    }
    lv[e] = v;
  }
}

// STATS (KEPT = false): statistics of l and a over K0; KEPT: of a over the rule's set.
template <int DT, bool KEPT>
__device__ void block_pass(const Call& c, const RowCtx& r, int blk, int lane, BlkRec* out) {
  float lv[32];
  load_block<DT>(c, r, blk, lane, lv);
  if (KEPT) {  // lv := a of the kept columns, -inf elsewhere
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      Col col;
      col.l = lv[e];
      col.in0 = lv[e] > neg_inf();
      col.x = xf(lv[e], r.greedy, r.invT);
      lv[e] = shard::in_rule(r.k, col, col_of<DT>(blk, lane, e)) ? col.x : neg_inf();
    }
  }
  float m1 = neg_inf(), m2 = neg_inf();
  int cnt = 0;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    if (!KEPT) m2 = fmaxf(m2, fminf(m1, lv[e]));
    m1 = fmaxf(m1, lv[e]);
    cnt += lv[e] > neg_inf();
  }
  const float M = warp_max(m1);
  BlkRec rec;
  rec.m1 = M;
  rec.cnt = warp_sumi(cnt);
  rec.sec = neg_inf();
  rec.amax = INT_MAX;
  rec.sl = rec.el = rec.sa = rec.ea = 0.f;
  if (!KEPT) {
    const unsigned at_max = __ballot_sync(0xffffffffu, m1 == M);
    float sec = (m1 == M) ? m2 : m1;
    sec = warp_max(sec);
    if (__popc(at_max) > 1) sec = M;
    rec.sec = sec;
    int amax = INT_MAX;
    if (m1 == M && M != neg_inf()) {
#pragma unroll
      for (int e = 31; e >= 0; --e)
        if (lv[e] == M) amax = col_of<DT>(blk, lane, e);
    }
    rec.amax = warp_mini(amax);
  }
  if (M != neg_inf()) {
    float s = 0.f, en = 0.f;
    exp_terms<32>([&](int e) { return lv[e]; }, M, s, en);
    s = warp_sum(s);
    en = warp_sum(en) * kLn2;
    if (KEPT) {
      rec.sa = s;
      rec.ea = en;
    } else {
      rec.sl = s;
      rec.el = en;
      if (r.sep) {
        const float ma = xf(M, false, r.invT);
        float s2 = 0.f, en2 = 0.f;
        exp_terms<32>([&](int e) { return xf(lv[e], false, r.invT); }, ma, s2, en2);
        rec.sa = warp_sum(s2);
        rec.ea = warp_sum(en2) * kLn2;
      } else {
        rec.sa = s;
        rec.ea = en;
      }
    }
  }
  if (lane == 0) *out = rec;
}

// The n-th (0-based, in id order) column with x == v among the columns [lo, hi) (global ids):
// returns the column (>= 0), or -1 - (number of matches) when fewer. Whole warp.
template <int DT>
__device__ int32_t scan_part(const Call& c, const RowCtx& r, int32_t lo, int32_t hi, bool kind_a,
                             float v, int n, int lane) {
  int seen = 0;
  for (int32_t base0 = lo; base0 < hi; base0 += 32 * 32) {
    float xv[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const int32_t col = base0 + e * 32 + lane;
      xv[e] = col < hi ? load_l1<DT>(c, r, col - c.off) : neg_inf();
    }
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const float l = xv[e];
      const bool m = l > neg_inf() && (kind_a ? xf(l, r.greedy, r.invT) : l) == v;
      const unsigned bal = __ballot_sync(0xffffffffu, m);
      const int pc = __popc(bal);
      if (n - seen < pc) return base0 + e * 32 + (int32_t)__fns(bal, 0, n - seen + 1);
      seen += pc;
    }
  }
  return -1 - seen;
}

// The n-th (0-based, in id order) column of the slice with x == v (x = l, or a when kind_a),
// scanning only the blocks that can hold it (for l, a block whose maximum is v and whose second is
// below v holds exactly one, its first argmax). Whole warp; -1 if none.
template <int DT>
__device__ int32_t find_nth(const Call& c, const RowCtx& r, const BlkRec* recs, const Geo& gm,
                            bool kind_a, float v, int n, int lane) {
  for (int bi = 0; bi < gm.nblk; ++bi) {
    const BlkRec& br = recs[bi];
    if (br.cnt == 0) continue;
    const float bm = kind_a ? xf(br.m1, r.greedy, r.invT) : br.m1;
    if (!(bm >= v)) continue;
    if (!kind_a) {
      if (br.m1 == v && n == 0) return br.amax;
      if (br.m1 == v && br.sec < v) {  // exactly one match: the block's argmax
        --n;
        continue;
      }
      if (br.m1 > v && br.sec < v) continue;  // no match
    }
    int32_t lo, hi;
    bool full;
    part_range(c, gm.b_first + bi, &lo, &hi, &full);
    const int32_t got = scan_part<DT>(c, r, lo, hi, kind_a, v, n, lane);
    if (got >= 0) return got;
    n -= -1 - got;
  }
  return -1;
}

// Token winner of the rule's columns in [lo, hi) (global ids): argmax of (double)a + G_token, ties
// to the lower id. Whole warp; every lane gets the result.
template <int DT>
__device__ Winner warp_winner(const Call& c, const RowCtx& r, const KRule& k, int32_t lo, int32_t hi,
                              int lane) {
  const shard::Params& q = r.w.q;
  const IdDraws draws(q.seed, q.step, r.w.pos, kSaltToken);
  float sf[32];
  float bf = neg_inf();
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const int32_t col = lo + e * 32 + lane;
    float v = neg_inf();
    if (col < hi) {
      Col cl;
      cl.l = load_l1<DT>(c, r, col - c.off);
      cl.in0 = cl.l > neg_inf();
      cl.x = xf(cl.l, r.greedy, r.invT);
      if (shard::in_rule(k, cl, col))  // finite: |a| <= FLT_MAX, |G| < 37
        v = cl.x + approx_gumbel(draws.bits((uint32_t)col));
    }
    sf[e] = v;
    bf = fmaxf(bf, v);
  }
  bf = warp_max(bf);
  Winner w = shard::no_winner();
  if (bf == neg_inf()) return w;
  const float thr = bf - approx_margin(bf);
  double bv = 0;
  int bt = INT_MAX;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    // (thr may round to -inf at |a| ~ FLT_MAX: excluded columns stay out explicitly)
    if (sf[e] == neg_inf() || !(sf[e] >= thr)) continue;
    const int32_t col = lo + e * 32 + lane;
    const float l = load_l1<DT>(c, r, col - c.off);
    const double v = (double)xf(l, r.greedy, r.invT) + bits_to_gumbel(draws.bits((uint32_t)col));
    argmax_merge(bv, bt, v, col);
  }
  warp_argmax(bv, bt);
  if (bt == INT_MAX) return w;
  const float l = load_l1<DT>(c, r, bt - c.off);
  w.id = bt;
  w.l = l;
  w.a = xf(l, r.greedy, r.invT);
  w.key = bv;
  return w;
}

// Shared memory of the block-pass kernels.
struct CandSmem {
  unsigned long long key[kCandMax];
  float x[kCandMax];
  unsigned hist[shard::kBins];
};
struct PassSmem {
  RowCtx r;
  union {
    BlkRec recs[kMaxBlocks];
    SmemBins bins;
    CandSmem cand;
    MergeBuf merge;
  } u;
  int warp_cnt[kWarps];
  int res, flag;
  long long keep;
  int cut_blk[2];          // block ids of the cut parts (in order), -1 none
  int full_blk;            // best full block, -1 none
  double full_score;
  double cut_val[2];
  int misc[6];
};

// Merge of the block records (warp 0) and the sampler share: scores, cut sums, then the winners by
// warps 0-2. m_ref: the reference of the cut sums (STATS: the rank's max a; KEPT: the global max).
template <int DT, bool KEPT>
__device__ void make_share_cta(const Call& c, PassSmem& S, const Geo& gm, const KRule& k, double m_ref,
                               Share* out) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const RowCtx& r = S.r;
  const shard::Params& q = r.w.q;
  if (wid == 0) {
    double best = 0;
    int bb = INT_MAX;
    for (int bi = lane; bi < gm.nblk; bi += 32) {
      const BlkRec& br = S.u.recs[bi];
      if (br.cnt == 0) continue;
      int32_t lo, hi;
      bool full;
      const int32_t blk = gm.b_first + bi;
      part_range(c, blk, &lo, &hi, &full);
      if (!full) continue;
      const float mab = KEPT ? br.m1 : xf(br.m1, r.greedy, r.invT);
      const double score = ((double)mab + log((double)br.sa)) +
                           gumbel(q.seed, q.step, r.w.pos, (uint32_t)blk, kSaltBlock);
      argmax_merge(best, bb, score, blk);
    }
    warp_argmax(best, bb);
    if (lane == 0) {
      S.full_blk = bb == INT_MAX ? -1 : bb;
      S.full_score = best;
      int ncut = 0;
      S.cut_blk[0] = S.cut_blk[1] = -1;
      const int ends[2] = {0, gm.nblk - 1};
      for (int x = 0; x < 2; ++x) {
        const int bi = ends[x];
        if (x == 1 && bi == 0) break;
        const BlkRec& br = S.u.recs[bi];
        int32_t lo, hi;
        bool full;
        part_range(c, gm.b_first + bi, &lo, &hi, &full);
        if (full || br.cnt == 0) continue;
        const float mab = KEPT ? br.m1 : xf(br.m1, r.greedy, r.invT);
        S.cut_blk[ncut] = gm.b_first + bi;
        S.cut_val[ncut] = (double)br.sa * exp((double)mab - m_ref);
        ++ncut;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    shard::clear_share(out, m_ref);
    if (S.full_blk >= 0) {
      out->full.block = S.full_blk;
      out->full.value = S.full_score;
    }
    for (int x = 0; x < 2; ++x)
      if (S.cut_blk[x] >= 0) {
        out->cut[x].block = S.cut_blk[x];
        out->cut[x].value = S.cut_val[x];
      }
  }
  __syncthreads();
  // Winners: warp 0 the full block, warps 1 and 2 the cut blocks.
  int blk = -1;
  BlockPart* dst = nullptr;
  if (wid == 0) {
    blk = S.full_blk;
    dst = &out->full;
  } else if (wid == 1 || wid == 2) {
    blk = S.cut_blk[wid - 1];
    dst = &out->cut[wid - 1];
  }
  if (blk >= 0) {
    int32_t lo, hi;
    bool full;
    part_range(c, blk, &lo, &hi, &full);
    const Winner w = warp_winner<DT>(c, r, k, lo, hi, lane);
    if (lane == 0) dst->win = w;
  }
}

}  // namespace kshard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_BLOCK_CUH_
