// Vocabulary-parallel kernels: round 0 (STATS), stats_kernel: one CTA per row; block pass, the
// slice's statistics (top-2 of l and a, sums), the sampler share over K0, and the top-k candidates
// (a 4 x 8-bit radix select of the threshold, an ordered collection, a bitonic sort).
#ifndef DDS_KERNELS_SHARD_STATS_CUH_
#define DDS_KERNELS_SHARD_STATS_CUH_

#include "block.cuh"

namespace dds {
namespace kshard {

// ------------------------------------------------------------------------------------------------
// Round 0: STATS.
template <int DT>
__device__ void stats_candidates(const Call& c, PassSmem& S, int32_t nwant, Cand* out) {
  const int tid = threadIdx.x;
  const RowCtx& r = S.r;
  CandSmem& cs = S.u.cand;
  // Radix select of the nwant-th largest key (order_key of a), one byte per pass.
  uint32_t prefix = 0;
  int32_t need = nwant;  // rank (1-based) of the threshold within the current prefix
  for (int d = 0; d < 4; ++d) {
    for (int b = tid; b < shard::kBins; b += blockDim.x) cs.hist[b] = 0;
    __syncthreads();
    const int shift = 24 - 8 * d;
    for_cols<DT>(c, r, [&](int32_t, float l) {
      if (!(l > neg_inf())) return;
      const uint32_t key = shard::order_key(xf(l, r.greedy, r.invT));
      if (d > 0 && (key >> (shift + 8)) != prefix) return;
      atomicAdd(&cs.hist[(key >> shift) & 255u], 1u);
    });
    __syncthreads();
    if (tid == 0) {
      int32_t rem = need;
      int b = shard::kBins - 1;
      for (; b > 0; --b) {
        if ((int32_t)cs.hist[b] >= rem) break;
        rem -= (int32_t)cs.hist[b];
      }
      S.misc[0] = (int)((prefix << 8) | (uint32_t)b);
      S.misc[1] = rem;
      S.misc[4] = (int)cs.hist[b];  // after the last pass: the columns equal to the threshold
    }
    __syncthreads();
    prefix = (uint32_t)S.misc[0];
    need = S.misc[1];
    __syncthreads();
  }
  const uint32_t thr = prefix;
  const int32_t ties = need;            // ties at thr to keep (the lowest ids)
  const int32_t above = nwant - ties;   // columns with key > thr
  const int32_t n_eq = S.misc[4];
  if (tid == 0) S.misc[2] = 0;  // slots taken
  __syncthreads();
  int32_t nsort = nwant;
  if (above + n_eq <= kCandMax) {
    // Few ties: collect every column with key >= thr (any order), sort, keep the first nwant
    // (ties sorted by lower id).
    nsort = above + n_eq;
    for_cols<DT>(c, r, [&](int32_t t, float l) {
      if (!(l > neg_inf())) return;
      const float x = xf(l, r.greedy, r.invT);
      const uint32_t key = shard::order_key(x);
      if (key < thr) return;
      const int slot = atomicAdd(&S.misc[2], 1);
      if (slot < kCandMax) {
        cs.key[slot] = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)(c.off + t));
        cs.x[slot] = x;
      }
    });
  } else {
  // Many ties: ordered collection (ties by lower id).
  const int lane = tid & 31, wid = tid >> 5;
  int32_t tie_seen = 0;
  for (int32_t base = 0; base < c.Vs; base += blockDim.x) {
    const int32_t t = base + tid;
    bool is_tie = false;
    float x = 0.f;
    uint32_t key = 0;
    if (t < c.Vs) {
      const float l = load_l1<DT>(c, r, t);
      if (l > neg_inf()) {
        x = xf(l, r.greedy, r.invT);
        key = shard::order_key(x);
        if (key > thr) {
          const int slot = atomicAdd(&S.misc[2], 1);
          if (slot < above) {
            cs.key[slot] = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)(c.off + t));
            cs.x[slot] = x;
          }
        }
        is_tie = key == thr;
      }
    }
    const unsigned bal = __ballot_sync(0xffffffffu, is_tie);
    if (lane == 0) S.warp_cnt[wid] = __popc(bal);
    __syncthreads();
    const int got_above = S.misc[2];  // stable between the two barriers
    int before = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < wid) before += S.warp_cnt[w];
      total += S.warp_cnt[w];
    }
    if (is_tie) {
      const int32_t idx = tie_seen + before + __popc(bal & ((1u << lane) - 1u));
      if (idx < ties) {
        cs.key[above + idx] = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)(c.off + t));
        cs.x[above + idx] = x;
      }
    }
    tie_seen += total;
    __syncthreads();
    if (tie_seen >= ties && got_above >= above) break;
  }
  }
  __syncthreads();
  // Bitonic sort, descending, over the next power of two (padding keys 0 sort last).
  int n2 = 1;
  while (n2 < nsort) n2 <<= 1;
  for (int e = nsort + tid; e < n2; e += blockDim.x) {
    cs.key[e] = 0;
    cs.x[e] = 0.f;
  }
  __syncthreads();
  for (int size = 2; size <= n2; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int e = tid; e < n2; e += blockDim.x) {
        const int p = e ^ stride;
        if (p > e) {
          const bool desc = (e & size) == 0;
          const unsigned long long ke = cs.key[e], kp = cs.key[p];
          if (desc ? (ke < kp) : (ke > kp)) {
            cs.key[e] = kp;
            cs.key[p] = ke;
            const float xe = cs.x[e];
            cs.x[e] = cs.x[p];
            cs.x[p] = xe;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int e = tid; e < nwant; e += blockDim.x) {
    Cand cd;
    cd.a = cs.x[e];
    cd.id = (int32_t)(0xffffffffu - (uint32_t)(cs.key[e] & 0xffffffffull));
    out[e] = cd;
  }
  __syncthreads();
}

template <int DT>
__global__ void __launch_bounds__(kThreads, kPassMinBlocks) stats_kernel(const __grid_constant__ Call c, unsigned char* out) {
  __shared__ PassSmem S;
  const int i = blockIdx.x;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  unsigned char* rowp = out + c.row_bytes[0] * i;
  // Zero the row record (the CPU memsets it).
  {
    unsigned long long* p = reinterpret_cast<unsigned long long*>(rowp);
    for (int64_t e = threadIdx.x; e < c.row_bytes[0] / 8; e += blockDim.x) p[e] = 0ull;
  }
  if (threadIdx.x == 0) setup_row(c, i, false, &S.r);
  __syncthreads();
  const Geo gm = geo(c);
  for (int bi = wid; bi < gm.nblk; bi += kWarps)
    block_pass<DT, false>(c, S.r, gm.b_first + bi, lane, &S.u.recs[bi]);
  __syncthreads();
  StatsHead& h = *reinterpret_cast<StatsHead*>(rowp);
  const RowCtx& r = S.r;
  if (wid == 0) {
    int n0 = 0;
    Top2 t{neg_inf(), INT_MAX, neg_inf()};
    for (int bi = lane; bi < gm.nblk; bi += 32) {
      const BlkRec& br = S.u.recs[bi];
      if (br.cnt == 0) continue;
      n0 += br.cnt;
      t = top2_merge(t, Top2{br.m1, br.amax, br.sec});
    }
    n0 = warp_sumi(n0);
    t = warp_top2(t);
    int32_t lid1 = -1, aid0 = -1, aid1 = -1;
    float av0 = 0.f, av1 = 0.f;
    double zl = 0, wl = 0, za = 0, wa = 0;
    if (n0 > 0) {
      const double ml = t.m1;
      const float maf = xf(t.m1, r.greedy, r.invT);
      const double ma = maf;
      for (int bi = lane; bi < gm.nblk; bi += 32) {
        const BlkRec& br = S.u.recs[bi];
        if (br.cnt == 0) continue;
        const double dl = (double)br.m1 - ml, fl = exp(dl);
        zl += (double)br.sl * fl;
        wl += fl * ((double)br.el + dl * (double)br.sl);
        const double da = (double)xf(br.m1, r.greedy, r.invT) - ma, fa = exp(da);
        za += (double)br.sa * fa;
        wa += fa * ((double)br.ea + da * (double)br.sa);
      }
      zl = warp_sumd(zl);
      wl = warp_sumd(wl);
      za = warp_sumd(za);
      wa = warp_sumd(wa);
      // Ids of the runners-up (and of the top of a when 1/T merges values).
      if (n0 >= 2) lid1 = find_nth<DT>(c, r, S.u.recs, gm, false, t.m2, t.m2 == t.m1 ? 1 : 0, lane);
      av0 = maf;
      aid0 = t.i1;
      if (n0 >= 2) {
        av1 = xf(t.m2, r.greedy, r.invT);
        aid1 = lid1;
        if (r.sep && av1 == av0) {
          aid0 = find_nth<DT>(c, r, S.u.recs, gm, true, av0, 0, lane);
          aid1 = find_nth<DT>(c, r, S.u.recs, gm, true, av0, 1, lane);
        } else if (r.sep) {
          aid1 = find_nth<DT>(c, r, S.u.recs, gm, true, av1, 0, lane);
        }
      }
    }
    if (lane == 0) {
      h.magic = shard::kMagic;
      h.vocab_offset = c.off;
      h.vocab_slice = c.Vs;
      h.n0 = n0;
      h.top_l_id[0] = n0 > 0 ? t.i1 : -1;
      h.top_l_id[1] = lid1;
      h.top_l[0] = n0 > 0 ? t.m1 : 0.f;
      h.top_l[1] = n0 >= 2 ? t.m2 : 0.f;
      h.top_a_id[0] = n0 > 0 ? aid0 : -1;
      h.top_a_id[1] = n0 >= 2 ? aid1 : -1;
      h.top_a[0] = av0;
      h.top_a[1] = av1;
      h.zl = zl;
      h.wl = wl;
      h.za = za;
      h.wa = wa;
      const shard::Params& q = r.w.q;
      const bool want = n0 > 0 && !q.greedy && q.k > 0 && q.k <= c.C;
      const int32_t nc = want ? (n0 < c.C ? n0 : c.C) : 0;
      h.n_cand = nc;
      S.misc[3] = nc;
      S.flag = n0 > 0 && !q.greedy;
      shard::clear_share(&h.share, 0);
    }
  }
  __syncthreads();
  if (S.flag) make_share_cta<DT, false>(c, S, gm, shard::rule_k0(), (double)h.top_a[0], &h.share);
  __syncthreads();
  const int32_t nc = S.misc[3];
  if (nc > 0) stats_candidates<DT>(c, S, nc, reinterpret_cast<Cand*>(rowp + sizeof(StatsHead)));
}

}  // namespace kshard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_STATS_CUH_
