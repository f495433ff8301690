// Selection machinery of filtered rows: order-preserving keys, fixed-point masses, radix selects
// over a source of entries (select_src) run by a team (WarpTeam / CtaTeam), the kept set and its
// token (list_token); the block terms of the unfiltered statistics (add_rec_terms, block_top2).
#ifndef DDS_KERNELS_SAMPLE_SELECT_CUH_
#define DDS_KERNELS_SAMPLE_SELECT_CUH_

#include "outputs.cuh"

namespace dds {
namespace ksample {

// ------------------------------------------------------------------------------------------------
// Filtered rows from candidates of the streaming pass.
//
// Every warp of a filtered row writes, besides its block record, a list of the block's columns
// with l >= tau (tau: the smallest of the per-group maxima of l over groups of 2^lvl lanes, so at
// least 32 / 2^lvl lanes contribute; raised level by level when the list would overflow) and
// records tau in BlockRec::ea (every finite column of the block outside the list has l < tau),
// the list length in BlockRec::pad and, for top-p rows without top-k, the sum of exp(a - ma) over
// the columns outside the list in BlockRec::sa. The last warp of the row merges the lists: with
// U = max tau, the candidates with a > row::temper(prev(U)) are exactly a prefix S of the order
// (a desc, t asc). When the kept set is provably inside S (top-k with k <= |S|, top-p whose
// boundary lies in S, min-p threshold above U, or S = every finite column), the warp selects the
// thresholds on S (radix select, 8-bit digits), samples and writes every output; otherwise it
// appends the row to the fallback list that filter_kernel then processes exactly.
// The selects' keys: row::order_key (kernels/common/row.h; -0 and +0 are one value, their columns
// tie) and its inverse.
__device__ __forceinline__ uint32_t fkey(float a) { return row::order_key(a); }
__device__ __forceinline__ float fkey_inv(uint32_t K) { return row::key_value(K); }
constexpr double kMassScale = 17592186044416.0;  // 2^44: fixed-point masses (e <= 1)
// Candidates: cand_finish_kernel finishes each row, one warp per row, after the pass.
constexpr int kWBins = 256;

// The smallest float x with exp((double)x - md) >= minp (docs §3 min-p as a value threshold).
__device__ __forceinline__ float minp_threshold(float m, double md, float minp) {
  const double lm = log((double)minp);
  float x = (float)(md + lm);
  if (x > m) x = m;
  int it = 0;
  while (it++ < 64 && !(exp((double)x - md) >= (double)minp)) x = nextafterf(x, FLT_MAX);
  it = 0;
  while (it++ < 64) {
    const float y = nextafterf(x, -FLT_MAX);
    if (exp((double)y - md) >= (double)minp) x = y;
    else break;
  }
  return x;
}

// The row pass's min-p floor for a block of finite maximum M (min-p without top-k or top-p):
// min-p keeps only a >= amin (minp_threshold of the row's tempered maximum m >= temper(M)), and
// amin >= m + ln(min_p) up to rounding, so no column below the floor is kept; a list from it
// leaves every other column below its bound, and the tempered bound stays below amin, so rows
// whose blocks all list from their floors settle (amin > Ua). The margin, 2^-10 (1 + |temper(M)|),
// is many times the rounding of logf and of these float operations (a few ulps each).
// -FLT_MAX (no floor) where the result is not finite or lies above M.
__device__ __forceinline__ float minp_floor(float M, float invT, float ln_minp) {
  const float tM = row::temper(M, invT);
  const float f = (tM + ln_minp - 0x1p-10f * (1.f + fabsf(tM))) / invT;
  return (isfinite(f) && f <= M) ? f : -FLT_MAX;
}

// f(c, l) for the entries S[j] this lane owns (j = lane mod 32), four loads in flight; j0 /
// step: a CTA's warps share the list (warp w: j0 = 128 w + lane, step 128 x warps). kCg: S is
// in global memory, read with __ldcg (written in this kernel, by this or other CTAs, before a
// fence); else S is read through a generic pointer (a list in shared memory, or in global memory
// that the reader's last __threadfence() followed).
template <bool kCg = true, typename F>
__device__ __forceinline__ void for_list(const int2* S, int nS, int lane, F f, int j0 = -1,
                                         int step = 128) {
  for (j0 = j0 < 0 ? lane : j0; j0 < nS; j0 += step) {
    int2 e[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      e[u] = (j0 + 32 * u < nS) ? (kCg ? __ldcg(S + j0 + 32 * u) : S[j0 + 32 * u]) : make_int2(-1, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (j0 + 32 * u < nS) f(e[u].x, __int_as_float(e[u].y));
  }
}

// Fixed-point masses of histogram bins (select_src, radix_select) are kept as two 32-bit words
// per bin, the low word's wrap-arounds carried into the high word by the thread whose add
// wrapped (the atomic's return value tells it): a 64-bit atomic add on shared memory is a
// compare-and-swap loop (ATOMS.CAST.SPIN.64 on sm_90), and on flat rows, where most columns fall
// into a few bins, those loops dominated (flat top-p at 4096 x 262144 ran at 37x / 81x the
// one-read time). The sum is the same integer (< 2^64 as before).
__device__ __forceinline__ void mass_add(uint32_t* mlo, uint32_t* mhi, uint32_t bin,
                                         unsigned long long m) {
  const uint32_t lo = (uint32_t)m, hi = (uint32_t)(m >> 32);
  const uint32_t old = atomicAdd(&mlo[bin], lo);
  const uint32_t c = hi + ((uint32_t)(old + lo) < old ? 1u : 0u);
  if (c) atomicAdd(&mhi[bin], c);
}
__device__ __forceinline__ unsigned long long mass_at(const uint32_t* mlo, const uint32_t* mhi,
                                                      int bin) {
  return ((unsigned long long)mhi[bin] << 32) + mlo[bin];
}

// The CTA's 64-bit integer sums of N values per thread, in one exchange (two barriers for the N;
// any order gives the same integers; a signed sum passes through as its two's complement): w has
// N slots per warp in shared memory. Every thread gets the sums, in place.
template <int N>
__device__ __forceinline__ void cta_sum_u64(unsigned long long (&v)[N], unsigned long long* w) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
  if (lane == 0)
#pragma unroll
    for (int i = 0; i < N; ++i) w[N * wid + i] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = 0;
  for (int u = 0; u < nw; ++u)
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += w[N * u + i];
  __syncthreads();
}

// The warp's scan of a radix pass (select_src: 256 bins, 8 per lane): lane L sums its `per` bins
// from hi = nbins - 1 - L per down (counts; fixed-point masses in mode 1; its lowest non-empty
// bin), then the inclusive prefix over the lanes (bin_scan; radix_pick, filter_select.cuh, uses it
// over the sums of its 32 segments).
struct BinPrefix {
  long long lc, pc;
  unsigned long long lm, pm;
  int last_ne;
};
// The inclusive prefix over the lanes of their sums lc / lm (into pc / pm).
__device__ __forceinline__ void bin_scan(BinPrefix& r, int lane) {
  r.pc = r.lc;
  r.pm = r.lm;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const long long c2 = __shfl_up_sync(0xffffffffu, r.pc, o);
    const unsigned long long m2 = __shfl_up_sync(0xffffffffu, r.pm, o);
    if (lane >= o) {
      r.pc += c2;
      r.pm += m2;
    }
  }
}
__device__ __forceinline__ BinPrefix bin_prefix(const uint32_t* cnt, const uint32_t* mlo,
                                                const uint32_t* mhi, int mode, int hi, int per,
                                                int lane) {
  BinPrefix r{0, 0, 0, 0, -1};
  for (int b = hi; b > hi - per; --b) {
    r.lc += cnt[b];
    if (mode == 1) r.lm += mass_at(mlo, mhi, b);
    if (cnt[b]) r.last_ne = b;
  }
  bin_scan(r, lane);
  return r;
}
// The lane whose bins first reach the goal (count `need` / mass `target` on top of what lies above
// the prefix), or, when rounding leaves it unreached, the lane of the lowest non-empty bin.
__device__ __forceinline__ int goal_lane(const BinPrefix& b, int mode, long long above_cnt,
                                         long long need, unsigned long long above_mass,
                                         double target) {
  bool hit;
  if (mode == 0) hit = (above_cnt + (b.pc - b.lc) < need) && (above_cnt + b.pc >= need);
  else hit = ((double)(above_mass + (b.pm - b.lm)) < target) && ((double)(above_mass + b.pm) >= target);
  const unsigned hitmask = __ballot_sync(0xffffffffu, hit && b.lc > 0);
  if (hitmask) return __ffs(hitmask) - 1;
  const unsigned ne = __ballot_sync(0xffffffffu, b.last_ne >= 0);
  return ne ? 31 - __clz(ne) : 0;
}
// In that lane: its bin holding the goal (c / m: the count / mass above the lane's bins on entry,
// above the chosen bin on return).
__device__ __forceinline__ int goal_bin(const uint32_t* cnt, const uint32_t* mlo,
                                        const uint32_t* mhi, int mode, int hi, int per,
                                        int last_ne, long long need, double target, long long& c,
                                        unsigned long long& m) {
  int chosen = last_ne < 0 ? hi : last_ne;
  for (int b = hi; b > hi - per; --b) {
    if (cnt[b] == 0) continue;
    const unsigned long long mb = mode == 1 ? mass_at(mlo, mhi, b) : 0ull;
    const bool reach = (mode == 0) ? (c + (long long)cnt[b] >= need) : ((double)(m + mb) >= target);
    if (reach || b == last_ne) {
      chosen = b;
      break;
    }
    c += cnt[b];
    m += mb;
  }
  return chosen;
}

struct WSel {
  uint32_t key;                   // the selected key K
  long long above_cnt;            // entries with key > K
  unsigned long long above_mass;  // their fixed-point mass (mode 1)
  int eq_cnt;                     // entries with key == K
  unsigned long long total;       // mode 1: the mass of every entry f accepts (the first pass's)
  bool reached;                   // mode 1: total >= target (else the select stopped there)
};

struct NoMass {
  __device__ __forceinline__ unsigned long long operator()(uint32_t) const { return 0ull; }
};
// filter_thresholds' top-k by another select (split_finish_kernel: ranks on a small S): none.
struct NoRank {
  __device__ __forceinline__ bool operator()(int, uint32_t&, int&) const { return false; }
};
// A call (team-uniform) once a select or filter_thresholds knows something early: nothing.
struct NoCall {
  __device__ __forceinline__ void operator()() const {}
};
// Who runs a select (select_src) or a token search (list_token): one warp (WarpTeam), or the
// kRowWarps warps of a CTA (CtaTeam: every warp walks its share of the entries into the shared
// bins, warp 0 scans them and hands the results over in TeamSmem).
struct TeamSmem {
  uint32_t chosen;
  int eqc, reached;
  long long c;
  unsigned long long mm, total;
  float wf[kRowWarps];
  double wv[kRowWarps];
  int wi[kRowWarps];
  float wl[kRowWarps];
  unsigned long long wz[3][kRowWarps];
  Top2 wt[kRowWarps];
};
struct WarpTeam {
  static constexpr bool kCta = false;
  static constexpr int kSize = 32;
  int lane;
  __device__ __forceinline__ int rank() const { return lane; }
  __device__ __forceinline__ int warp() const { return 0; }
  __device__ __forceinline__ void sync() const { __syncwarp(); }
};
struct CtaTeam {
  static constexpr bool kCta = true;
  static constexpr int kSize = kRowWarps * 32;
  int lane;
  TeamSmem* sm;
  __device__ __forceinline__ int rank() const { return (int)threadIdx.x; }
  __device__ __forceinline__ int warp() const { return (int)(threadIdx.x >> 5); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
};
__device__ __forceinline__ TeamSmem* team_smem(const WarpTeam&) { return nullptr; }
__device__ __forceinline__ TeamSmem* team_smem(const CtaTeam& t) { return t.sm; }

// Team reductions. CtaTeam: each warp's result through TeamSmem (team_max: wf, team_top2: wt,
// free again after the team's next barrier; team_argmax: wv / wi / wl, free again on return).
// team_merge: every thread merges the warps' results w[0..kRowWarps) in that order, into its own
// warp's value where merge is idempotent (kOwn: fmaxf), else from w[0] on.
template <bool kOwn, class Team, class T, class W, class M>
__device__ __forceinline__ T team_merge(const Team& team, T v, W slots, M merge) {
  if constexpr (Team::kCta) {
    T* w = slots(*team_smem(team));
    if (team.lane == 0) w[team.warp()] = v;
    team.sync();
    if (!kOwn) v = w[0];
#pragma unroll
    for (int u = kOwn ? 0 : 1; u < kRowWarps; ++u) v = merge(v, w[u]);
  }
  return v;
}
template <class Team>
__device__ __forceinline__ float team_max(const Team& team, float v) {
  return team_merge<true>(team, warp_max(v), [](TeamSmem& t) { return t.wf; },
                          [](float a, float b) { return fmaxf(a, b); });
}
// The row maximum's Top2 (top2_merge: exact, so any order gives the same) in every thread.
template <class Team>
__device__ __forceinline__ Top2 team_top2(const Team& team, Top2 v) {
  return team_merge<false>(team, warp_top2(v), [](TeamSmem& t) { return t.wt; },
                           [](Top2 a, Top2 b) { return top2_merge(a, b); });
}

// The number of b in [0, n) for which pred(b) holds, in every thread; pred is called for the
// thread's own b (rank, rank + kSize, ...) only (WarpTeam: per-lane counts, then warp_sumi;
// CtaTeam: one __syncthreads_count per kSize of b, a barrier each).
template <class Team, class Pred>
__device__ __forceinline__ int team_count(const Team& team, int n, Pred pred) {
  int c = 0;
  if constexpr (Team::kCta) {
    for (int b0 = 0; b0 < n; b0 += Team::kSize) {
      const int b = b0 + team.rank();
      c += __syncthreads_count(b < n && pred(b));
    }
  } else {
    for (int b = team.lane; b < n; b += 32) c += pred(b) ? 1 : 0;
    c = warp_sumi(c);
  }
  return c;
}
// The best of the kRowWarps warps' bests in TeamSmem (wv / wi, and wl when L), in every lane of
// the calling warp: lane u takes warp u's, three xor steps, then lane 0's to every lane. (A CTA
// finish at few rows is a chain of barriers that every warp passes in step, so each warp's
// instructions are its time: three shuffle steps in place of 8 dependent merges per thread.)
template <bool L>
__device__ __forceinline__ void merge_warp_bests(const TeamSmem& t, int lane, double& bv, int& bt,
                                                 float& bl) {
  static_assert((kRowWarps & (kRowWarps - 1)) == 0 && kRowWarps <= 32, "kRowWarps: a power of 2");
  double v = 0;
  int i = INT_MAX;
  float l = 0.f;
  if (lane < kRowWarps) {
    v = t.wv[lane];
    i = t.wi[lane];
    if constexpr (L) l = t.wl[lane];
  }
#pragma unroll
  for (int o = kRowWarps / 2; o > 0; o >>= 1) {
    const double v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    const int i0 = i;
    argmax_merge(v, i, v2, i2);
    if constexpr (L) {
      const float l2 = __shfl_xor_sync(0xffffffffu, l, o);
      if (i != i0) l = l2;
    }
  }
  bv = __shfl_sync(0xffffffffu, v, 0);
  bt = __shfl_sync(0xffffffffu, i, 0);
  if constexpr (L) bl = __shfl_sync(0xffffffffu, l, 0);
}
// The best (score bv, id bt; ties to the lower id; bt = INT_MAX: none) and the value bl that the
// thread holding it carries (a token's l); to_all = false: the result in warp 0 only.
template <class Team>
__device__ __forceinline__ void team_argmax(const Team& team, double& bv, int& bt, float& bl,
                                            bool to_all = true) {
  const int mine = bt;
  warp_argmax(bv, bt);
  const unsigned own = __ballot_sync(0xffffffffu, mine == bt && bt != INT_MAX);
  if (own) bl = __shfl_sync(0xffffffffu, bl, __ffs(own) - 1);
  if constexpr (Team::kCta) {  // (every thread passes the barriers: callers are CTA-uniform)
    TeamSmem& t = *team_smem(team);
    const int w = team.warp();
    if (team.lane == 0) {
      t.wv[w] = bv;
      t.wi[w] = bt;
      t.wl[w] = bl;
    }
    team.sync();
    if (to_all || w == 0) merge_warp_bests<true>(t, team.lane, bv, bt, bl);
    if (to_all) team.sync();  // (the hand-over is read before anyone writes it again)
  }
}

// The token search of every finish (plain_finish_row, finish_filtered, small_token,
// small_filter_kernel): the token among the columns a team walks, by the exact float64 Gumbel-max
// a_t + G_t (ties to the lower id), with fp32 approximate Gumbels (approx_gumbel) to pick the
// candidates. walk(f, again) calls f(c, l) for each of this thread's columns c in ascending order,
// l its value (-inf: not a column); again (std::true_type on the second, rare walk) lets a walk
// take a smaller, rolled form there; a = to_a(l); in_k(c, a): the column is kept. Each thread keeps its
// best two approximate scores; the exact score goes to its best when that is within approx_margin
// of the team's best (the token the exact scores pick is among those), and a thread whose
// runner-up is that close too walks again and scores every such column (rare). exact_all (a test
// hook): every kept column is scored exactly. Exact scores for every kept column had been ~22% of
// cand_finish's instructions at 4096 x 1025 top-p (ncu); holding the approximate scores for a
// second pass, more registers. Returns the token (team-uniform; INT_MAX: no kept column) and its
// l in *lt (the token's thread's value, handed over: no re-read of its column); to_all = false: in
// warp 0 only (a caller whose other warps stop there: one barrier fewer).
template <class Team, class W, class K, class A>
__device__ __forceinline__ int team_token(const Team& team, const Req& q, uint32_t pos, const W& walk,
                                          const K& in_k, const A& to_a, float* lt,
                                          bool exact_all = false, bool to_all = true) {
  const IdDraws draws(q.seed, q.step, pos, kSaltToken);
  Best2 bs{neg_inf(), neg_inf()};
  float a1 = 0.f, l1 = 0.f;
  int c1 = -1;
  walk([&](int c, float l) {
    if (l == neg_inf()) return;
    const float a = to_a(l);
    if (!in_k(c, a)) return;
    if (bs.add(a + approx_gumbel(draws.bits((uint32_t)c)))) {
      c1 = c;
      a1 = a;
      l1 = l;
    }
  }, std::false_type{});
  const float s1 = bs.s1, s2 = bs.s2;
  const float bf = team_max(team, s1);
  // (thr may round to -inf at |a| ~ FLT_MAX: columns without a score stay out explicitly)
  const float thr = exact_all ? -FLT_MAX : bf - approx_margin(bf);
  double bv = 0;
  int bt = INT_MAX;
  float bl = 0.f;
  if (s2 != neg_inf() && !(s2 < thr)) {
    walk([&](int c, float l) {
      if (l == neg_inf()) return;
      const float a = to_a(l);
      if (!in_k(c, a)) return;
      const uint64_t bits = draws.bits((uint32_t)c);
      if (a + approx_gumbel(bits) < thr) return;
      const int b0 = bt;
      argmax_merge(bv, bt, (double)a + bits_to_gumbel(bits), c);
      if (bt != b0) bl = l;
    }, std::true_type{});
  } else if (c1 >= 0 && !(s1 < thr)) {
    argmax_merge(bv, bt, (double)a1 + bits_to_gumbel(draws.bits((uint32_t)c1)), c1);
    bl = l1;
  }
  team_argmax(team, bv, bt, bl, to_all);
  *lt = bl;
  return bt;
}

// Warp radix select over a source of entries: each(g) calls g(c, a, key) for this lane's entries
// (a: the processed value, key = fkey(a)): finish_filtered's list S, or small_filter_kernel's
// row in shared memory. Among the entries for which f(c, a, key) is true (f may replace key, e.g.
// by the inverted column for a tie cut), the key K at which the count (mode 0: reaching `need`)
// or the fixed-point mass mf(key) (mode 1: reaching target = tgt(total), total = the mass of all
// the entries f accepts, summed by the first pass; computed only for the entries inside the
// current prefix) accumulated from the largest key down first reaches the goal: the largest K
// whose count / mass at or above it reaches the goal, so any digit layout gives the same K.
// hist / hm: this warp's shared bins (hm: kWBins 64-bit words, used as 2 x kWBins 32-bit ones).
// lst (optional, room for every entry; lcnt: a shared counter): after the first pass the entries
// inside the prefix are listed (column, source key), and the other three passes walk that list.
// reached(): called (the whole team) after the first pass when the goal lies within the entries.
template <int mode, typename Team, typename Each, typename F, typename TG, typename MF = NoMass,
          typename R = NoCall>
__device__ __forceinline__ WSel select_src(const Team& team, const Each& each,
                                           long long need, const TG& tgt, unsigned* hist,
                                           unsigned long long* hm, F f, MF mf = MF{},
                                           int2* lst = nullptr, unsigned* lcnt = nullptr,
                                           const R& reached = R{}) {
  const int lane = team.lane;
  uint32_t* mlo = reinterpret_cast<uint32_t*>(hm);  // bin masses: two 32-bit words (mass_add)
  uint32_t* mhi = mlo + kWBins;
  uint32_t prefix = 0, pmask = 0;
  long long above_cnt = 0;
  unsigned long long above_mass = 0, total = 0;
  double target = 0;
  int eqc_last = 0;
  int nlst = -1;  // >= 0: the passes walk lst[0, nlst)
  WSel r;
  r.reached = true;
  for (int pass = 0; pass < 4; ++pass) {
    const int sh = 24 - 8 * pass;
    for (int i = team.rank(); i < kWBins; i += Team::kSize) {
      hist[i] = 0u;
      mlo[i] = 0u;
      mhi[i] = 0u;
    }
    if (lst != nullptr && pass == 1) {
      // The entries inside the first digit's bin, listed (no masses, no bins: on a dense walk
      // the exp of the few entries inside would run in most steps of the warp).
      if (team.rank() == 0) *lcnt = 0u;
      team.sync();
      each([&](int c, float a, uint32_t key0) {
        uint32_t key = key0;
        if (f(c, a, key) && (key & pmask) == prefix) lst[atomicAdd(lcnt, 1u)] = make_int2(c, (int)key0);
      });
      team.sync();
      __threadfence();
      nlst = (int)*lcnt;
    }
    team.sync();
    auto visit = [&](int c, float a, uint32_t key0) {
      uint32_t key = key0;
      if (!f(c, a, key)) return;
      if ((key & pmask) != prefix) return;  // the mass only for entries inside the prefix
      const uint32_t bin = (key >> sh) & 255u;
      atomicAdd(&hist[bin], 1u);
      if (mode == 1) mass_add(mlo, mhi, bin, mf(key));
    };
    if (nlst >= 0) {
      for (int j = team.rank(); j < nlst; j += Team::kSize) {
        const int2 e = __ldcg(lst + j);
        visit(e.x, fkey_inv((uint32_t)e.y), (uint32_t)e.y);
      }
    } else {
      each(visit);
    }
    team.sync();
    long long c = 0;
    unsigned long long mm = 0;
    int chosen = 0, eqc = 0;
    bool stop = false;
    if (team.warp() == 0) {
      // Lane L owns bins 255 - 8L down to 248 - 8L (descending keys across the lanes).
      const int hi = kWBins - 1 - 8 * lane;
      const BinPrefix bp = bin_prefix(hist, mlo, mhi, mode, hi, 8, lane);
      if (mode == 1 && pass == 0) {
        total = __shfl_sync(0xffffffffu, bp.pm, 31);
        target = tgt(total);
        stop = !((double)total >= target);  // the goal lies beyond the entries: no select
      }
      if (!stop) {
        const int srcl = goal_lane(bp, mode, above_cnt, need, above_mass, target);
        if (lane == srcl) {
          c = above_cnt + (bp.pc - bp.lc);
          mm = above_mass + (bp.pm - bp.lm);
          chosen = goal_bin(hist, mlo, mhi, mode, hi, 8, bp.last_ne, need, target, c, mm);
          eqc = (int)hist[chosen];
        }
        chosen = __shfl_sync(0xffffffffu, chosen, srcl);
        c = __shfl_sync(0xffffffffu, c, srcl);
        mm = __shfl_sync(0xffffffffu, mm, srcl);
        eqc = __shfl_sync(0xffffffffu, eqc, srcl);
      }
      if constexpr (Team::kCta) {
        if (lane == 0) {
          TeamSmem& t = *team_smem(team);
          t.chosen = (uint32_t)chosen;
          t.c = c;
          t.mm = mm;
          t.eqc = eqc;
          t.total = total;
          t.reached = stop ? 0 : 1;
        }
      }
    }
    if constexpr (Team::kCta) {
      team.sync();
      const TeamSmem& t = *team_smem(team);
      chosen = (int)t.chosen;
      c = t.c;
      mm = t.mm;
      eqc = t.eqc;
      total = t.total;
      stop = t.reached == 0;
    }
    team.sync();  // every thread has read the bins (and the hand-over) before the next pass
    if (stop) {
      r.reached = false;
      break;
    }
    if (pass == 0) reached();
    prefix |= (uint32_t)chosen << sh;
    pmask |= 255u << sh;
    above_cnt = c;
    above_mass = mm;
    eqc_last = eqc;
  }
  r.key = prefix;
  r.above_cnt = above_cnt;
  r.above_mass = above_mass;
  r.eq_cnt = eqc_last;
  r.total = total;
  return r;
}

// One block's terms of an unfiltered row's sums (statistics: Za, Ea over a; Zl, El over l for
// guided statistics), relative to the row maxima Ma / Ml. Both finishes (the warp per row and the
// CTA per row's warp 0) add them in the same order, b = lane, lane + 32, ..., with explicit fma,
// and reduce with warp_sumd: a row's statistics do not depend on which finish ran (the choice
// follows the batch's row count); small_plain_kernel adds its (at most two) blocks' terms the
// same way from registers. Returns the block's a-maximum (-inf: no finite column).
// R: the record's fields, read when needed (RecL2: __ldcg of a BlockRec; RecReg: a register copy).
struct RecL2 {
  const BlockRec* p;
  __device__ __forceinline__ float maxl() const { return __ldcg(&p->maxl); }
  __device__ __forceinline__ float sa() const { return __ldcg(&p->sa); }
  __device__ __forceinline__ float ea() const { return __ldcg(&p->ea); }
  __device__ __forceinline__ float sl() const { return __ldcg(&p->sl); }
  __device__ __forceinline__ float el() const { return __ldcg(&p->el); }
};
struct RecReg {
  BlockRec r;
  __device__ __forceinline__ float maxl() const { return r.maxl; }
  __device__ __forceinline__ float sa() const { return r.sa; }
  __device__ __forceinline__ float ea() const { return r.ea; }
  __device__ __forceinline__ float sl() const { return r.sl; }
  __device__ __forceinline__ float el() const { return r.el; }
};
template <class R>
__device__ __forceinline__ float add_rec_terms(const R& rec, bool need_a, bool stats_guided,
                                               float invT, float Ma, float Ml, double& Za,
                                               double& Ea, double& Zl, double& El) {
  const float m1 = rec.maxl();
  if (m1 == neg_inf()) return neg_inf();
  // A record's sums (s, e) against its maximum, rescaled to the row's (dm below it) and added.
  auto add = [](double s, double e, double dm, double& Z, double& E) {
    const double w = exp(dm);
    Z = fma(s, w, Z);
    E = fma(w, fma(dm, s, e), E);
  };
  float ma = 0.f;
  if (need_a) {
    ma = row::temper(m1, invT);
    const double sa = (double)rec.sa();
    const double ea = (double)rec.ea();
    add(sa, ea, (double)ma - (double)Ma, Za, Ea);
  }
  if (stats_guided) {
    const double sl = (double)rec.sl();
    const double el = (double)rec.el();
    add(sl, el, (double)m1 - (double)Ml, Zl, El);
  }
  return ma;
}
__device__ __forceinline__ float add_block_terms(const BlockRec* recs, int b, bool need_a,
                                                 bool stats_guided, float invT, float Ma, float Ml,
                                                 double& Za, double& Ea, double& Zl, double& El) {
  return add_rec_terms(RecL2{recs + b}, need_a, stats_guided, invT, Ma, Ml, Za, Ea, Zl, El);
}

// Re-reads block `blk` of the row (L2 or HBM, 1024 columns): the first column holding M (the row
// maximum, which this block holds) and the block's runner-up (by min/max, as a multiset).
template <int DT>
__device__ __noinline__ Top2 block_top2(const SampleParams& P, const Req& q, int row, int blk,
                                        float M, int lane) {
  float lv[32];
  load_block_l<DT, true>(P, q, row, blk, lane, lv);
  return block_top2_regs<DT>(lv, blk, lane, M);
}

// Thresholds of a filtered row (finish_filtered step 3, small_filter_kernel): the kept set is
// the prefix key > kthr || (key == kthr && t <= cid) of the order (a desc, t asc), and a >= amin.
// each(g): g(c, a, fkey(a)) for this lane's entries of the source (nS entries in all: the
// candidates S, or every finite column of the row when `complete`); every finite column outside
// the source has a <= Ua. outside(): the fixed-point mass of the finite columns outside the
// source (asked for only by top-p without top-k; warp-collective). ok = false: the candidates
// cannot settle top-k; inside = false: the kept set is not provably inside the source. lst / lcnt:
// select_src's optional list (room for nS entries). topk(k, kthr, cid): a caller's own select of
// top-k's threshold (the same kthr and cid as the radix select and its tie cut), or false (team-
// uniform) to leave it to them. settled(): called (the whole team) as soon as the result will have
// ok and inside, before the top-p select's later passes (not always: a caller also decides from
// the result).
struct FiltThr {
  uint32_t kthr;
  int cid;
  bool ok, inside;
};
template <class Team, class Each, class Out, class TopK = NoRank, class Settled = NoCall>
__device__ __forceinline__ FiltThr filter_thresholds(const Team& team, const SampleParams& P,
                                                     const Req& q, const Each& each, int nS,
                                                     bool complete, float m, double md,
                                                     float amin, float Ua, unsigned* hist,
                                                     unsigned long long* hm, const Out& outside,
                                                     int2* lst = nullptr, unsigned* lcnt = nullptr,
                                                     const TopK& topk = TopK{},
                                                     const Settled& settled = Settled{}) {
  uint32_t kthr = 0;
  int cid = INT_MAX;
  bool inside = complete;  // the kept set provably lies in the source
  bool ok = true;
  bool applied_k = false;
  auto no_target = [](unsigned long long) { return 0.0; };
  auto tie_cut = [&](uint32_t K, int rr) -> int {
    const WSel s = select_src<0>(team, each, rr, no_target, hist, hm,
                                 [&](int c, float, uint32_t& key) {
                                   if (key != K) return false;
                                   if (key == kthr && c > cid) return false;
                                   key = ~(uint32_t)c;
                                   return true;
                                 }, NoMass{}, lst, lcnt);
    return (int)~s.key;
  };
  if (q.k > 0 && q.k < P.V) {
    if (complete && q.k >= nS) {
      // k >= |K0|: top-k is off.
    } else if (nS < q.k) {
      ok = false;
    } else {
      if (!topk(q.k, kthr, cid)) {
        const WSel s = select_src<0>(team, each, q.k, no_target, hist, hm,
                                     [](int, float, uint32_t&) { return true; }, NoMass{}, lst, lcnt);
        const int rr = q.k - (int)s.above_cnt;
        int c2 = INT_MAX;
        if (rr < s.eq_cnt) c2 = tie_cut(s.key, rr);
        kthr = s.key;
        cid = c2;
      }
      inside = true;
      applied_k = true;
    }
  }
  if (ok && q.p < 1.f) {
    if (q.p <= 0.f) {
      if (nS == 0) {
        ok = false;
      } else {
        const uint32_t K = fkey(m);
        const int c2 = tie_cut(K, 1);
        kthr = K;
        cid = c2;
        inside = true;
      }
    } else {
      auto mass_of = [&](uint32_t kk) {  // fixed-point mass of the column of key kk
        // (exactly 0 from d <= -32: exp(-32) 2^44 = 0.22 rounds to 0; no exp for those)
        const double d = (double)fkey_inv(kk) - md;
        return d > -32.0 ? __double2ull_rn(exp(d) * kMassScale) : 0ull;
      };
      // Z1 = the mass of K1 (fixed point): zs, the part in the source (the select's first pass
      // sums it), plus the rest of the row when no top-k; the target p Z1.
      const double zo = applied_k ? 0.0 : outside();
      const double p = (double)q.p;
      const WSel s = select_src<1>(team, each, 0,
                                   [&](unsigned long long zs) { return p * ((double)zs + zo); },
                                   hist, hm,
                                   [&](int c, float, uint32_t& key) {
                                     return !(key < kthr || (key == kthr && c > cid));
                                   }, mass_of, lst, lcnt, settled);
      if (s.reached) {
        const double target = p * ((double)s.total + zo);
        const uint32_t K = s.key;
        const unsigned long long A = s.above_mass;
        const double e = (double)mass_of(K);
        long long nk;
        if ((double)A >= target) nk = 1;
        else nk = (long long)ceil((target - (double)A) / e);
        if (nk < 1) nk = 1;
        if (nk < s.eq_cnt) {
          cid = tie_cut(K, (int)nk);
        } else if (K != kthr) {
          cid = INT_MAX;
        }
        kthr = K;
        inside = true;
      }
      // else: the boundary lies beyond S (K2 contains S): only min-p can bound the kept set.
    }
  }
  if (ok && q.minp > 0.f && amin > Ua) inside = true;
  return FiltThr{kthr, cid, ok, inside};
}

// The kept set of a filtered row (filter_thresholds): key > kthr || (key == kthr && t <= cid),
// and a >= amin.
struct Kept {
  uint32_t kthr;
  int cid;
  float amin;
  __device__ __forceinline__ bool operator()(int c, float a) const {
    const uint32_t kk = fkey(a);
    return (kk > kthr || (kk == kthr && c <= cid)) && a >= amin;
  }
};
// A kept column's fixed-point terms (order-free integer sums): returns its mass exp(a - m)
// x 2^44 and adds exp(a - m) (a - m) x 2^44 to ef.
__device__ __forceinline__ unsigned long long kept_terms(float a, double md, long long& ef) {
  const double d = (double)a - md;
  const double x = exp(d);
  ef += __double2ll_rn(x * d * kMassScale);
  return __double2ull_rn(x * kMassScale);
}
// The kept sums of a filtered row over its list S[0, nS) (for_list's layout from j0, step; kCg as
// there): each kept column's mass handed to add(block, mass) (an atomic add to the block's kept
// mass) and added to zf, its entropy term to ef; nk counts them (this thread's parts).
struct KeptSums {
  unsigned long long zf = 0;
  long long ef = 0;
  int nk = 0;
};
template <bool kCg = true, class K, class Add>
__device__ __forceinline__ KeptSums kept_list_sums(const int2* S, int nS, int lane, const K& in_k, float invT,
                                                   double md, const Add& add, int j0 = -1,
                                                   int step = 128) {
  KeptSums s;
  for_list<kCg>(S, nS, lane, [&](int c, float l) {
    const float a = row::temper(l, invT);
    if (!in_k(c, a)) return;
    const unsigned long long ux = kept_terms(a, md, s.ef);
    if (ux) add(c >> 10, ux);
    s.zf += ux;
    ++s.nk;
  }, j0, step);
  return s;
}

// A filtered row's winning block among its kept masses kept_mass(b), b in [0, nb) (fixed point;
// 0: no kept column): float64 score md + log(mass) + the block's Gumbel, ties by the lower block.
// This thread scores blocks b0, b0 + step, ...; the result is its warp's best (best, bbest;
// bbest = INT_MAX: none).
template <class M>
__device__ __forceinline__ void best_block(const M& kept_mass, int nb, int b0, int step, double md,
                                           const Req& q, uint32_t pos, double& best, int& bbest) {
  best = 0;
  bbest = INT_MAX;
  for (int b = b0; b < nb; b += step) {
    const unsigned long long s = kept_mass(b);
    if (s == 0ull) continue;
    const double score = (md + log((double)s / kMassScale)) +
                         gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
    argmax_merge(best, bbest, score, b);
  }
  warp_argmax(best, bbest);
}

// The token of a filtered row among the list S[0, nS) (team_token over the entries of the winning
// block bbest; for_list's layout and kCg: warp w of a CtaTeam walks entries 128 w + lane, step
// 128 x warps).
template <bool kCg = true, class Team, class K, class A>
__device__ __forceinline__ int list_token(const Team& team, const Req& q, uint32_t pos,
                                          const int2* S, int nS, int bbest, const K& in_k,
                                          const A& to_a) {
  const int lane = team.lane;
  const int j0 = 128 * team.warp() + lane, step = 128 * (Team::kSize / 32);
  float lt;
  return team_token(team, q, pos, [&](auto f, auto) {
    if (bbest == INT_MAX) return;
    for_list<kCg>(S, nS, lane, [&](int c, float l) {
      if ((c >> 10) == bbest) f(c, l);
    }, j0, step);
  }, in_k, to_a, &lt);
}

// A filtered row's guided statistics: one block's terms (maximum m1, sums sl / el of its record)
// relative to the row maximum Ml, in the order finish_filtered has always added them.
__device__ __forceinline__ void guided_terms(float m1, float slf, float elf, float Ml, double& Zl,
                                             double& El) {
  const double sl = (double)slf;
  const double el = (double)elf;
  const double dm = (double)m1 - (double)Ml;
  const double w = exp(dm);
  Zl += sl * w;
  El += w * (el + dm * sl);
}
// A filtered row's outputs and RowInfo (one thread): token, first argmax column, runner-up m2
// of l, maxima Ml (l) and m (a), the thresholds, the kept set's fixed-point sums (zf, ef) and
// size nk, the guided sums Zl / El (stats_guided).

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_SELECT_CUH_
