// Rows of V <= 2048 in one launch: small_plain_kernel (unfiltered) and small_filter_kernel
// (filtered), a warp or a CTA per row, the row held in registers.
#ifndef DDS_KERNELS_SAMPLE_SMALL_CUH_
#define DDS_KERNELS_SAMPLE_SMALL_CUH_

#include "plain_pass.cuh"

namespace dds {
namespace ksample {

// ------------------------------------------------------------------------------------------------
// small_plain_kernel: unfiltered rows of V <= 2048 (one or two 1024-token blocks; OmniVoice-style
// 1025 is one block and one column), one warp per row (or, for few rows, a CTA per row whose
// warps share the token pass), the row in registers: no block records, no re-reads of the
// maximum's block, one launch. The same arithmetic as plain_pass_kernel
// + a finish (block_sums on the same column layout, add_rec_terms in the warp finish's order, the
// block and token scores of finish_plain_warp), so every output is the same bits whichever path
// runs (the plan override small_plain=0 selects the general path; tests compare the two).
// NT: 16-byte groups per lane held for block 1: 0 (V <= 1024), 1 (a last block of at most
// 32 * VEC columns: only group 0 exists), NJ (any last block).
template <int DT>
__host__ __device__ constexpr int small_groups_for(int V) {
  return V <= kB ? 0 : (V - kB <= 32 * Elt<DT>::VEC ? 1 : 32 / Elt<DT>::VEC);
}

// Groups [0, NG) of block `blk` of the row as l (docs §2: guidance, banned column, NaN -> -inf,
// +inf -> FLT_MAX): lane holds column blk*1024 + j*32*VEC + lane*VEC + q at lv[j*VEC + q], columns
// >= V as -inf. Unguided rows load raw values (16-byte loads where the row allows) and sanitise
// only when a NaN-propagating maximum shows a NaN or +inf; returns the block maximum.
template <int DT, int NG>
__device__ __forceinline__ float small_load(const SampleParams& P, const Req& q, int row, int blk,
                                            int lane, float (&lv)[NG * Elt<DT>::VEC]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const bool vec = P.vec_ok != 0;
  if (!q.guided) {
#pragma unroll
    for (int j = 0; j < NG; ++j) load_vec<DT>(crow, blk * kB + j * 32 * VEC + lane * VEC, P.V, vec, &lv[j * VEC]);
  } else {
    const T* urow = reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride;
#pragma unroll
    for (int j = 0; j < NG; ++j) {
      float u[VEC];
      const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
      load_vec<DT>(crow, c0, P.V, vec, &lv[j * VEC]);
      load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = row::sanitize(row::guide(lv[j * VEC + e], u[e], q.g));
    }
  }
  ban_block<DT>(P, q, blk, lane, lv);
  return warp_block_max(lv);  // (only unguided rows can need the sanitising: guided ones were)
}

// The lane's first column holding the block maximum M and the block's runner-up (multiset), as
// block_top2 finds them, reduced over the warp.
template <int DT, int N>
__device__ __forceinline__ Top2 small_top2(const float (&lv)[N], int blk, float M, int lane) {
  float b1 = neg_inf(), b2 = neg_inf();
#pragma unroll
  for (int e = 0; e < N; ++e) {
    b2 = fmaxf(b2, fminf(b1, lv[e]));
    b1 = fmaxf(b1, lv[e]);
  }
  int am = INT_MAX;
  if (b1 == M) {
#pragma unroll
    for (int e = N - 1; e >= 0; --e)
      if (lv[e] == M) am = col_of<DT>(blk, lane, e);
  }
  return warp_top2(Top2{b1, am, b2});
}

// Row maximum (the larger of the blocks' maxima M0 / M1), its first column, the multiset
// runner-up (finish_plain_warp's Top2), from the registers of small_load (NT: as
// small_plain_kernel).
template <int DT, int NT, int N1>
__device__ __forceinline__ Top2 small_row_top2(const float (&l0)[32], const float (&l1)[N1],
                                               float M0, float M1, int lane) {
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  const bool max1 = NT > 0 && M1 > M0;  // the first block holding the maximum
  if (max1) {
    if constexpr (NT > 0) t = small_top2<DT, N1>(l1, 1, M1, lane);
    t.m2 = fmaxf(t.m2, M0);
  } else {
    t = small_top2<DT, 32>(l0, 0, M0, lane);
    if (NT > 0) t.m2 = fmaxf(t.m2, M1);
  }
  t.m1 = max1 ? M1 : M0;
  return t;
}

// Group j of block `blk` as l again (the token pass re-reads it: L1 / L2), the same values
// small_load produced: row::sanitize is the identity on values that needed no sanitising.
template <int DT>
__device__ __forceinline__ void small_group(const SampleParams& P, const Req& q, int row, int blk,
                                            int j, int lane, float (&l)[Elt<DT>::VEC]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
  const bool vec = P.vec_ok != 0;
  load_vec<DT>(crow, c0, P.V, vec, l);
  if (q.guided) {
    const T* urow = reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride;
    float u[VEC];
    load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
    for (int e = 0; e < VEC; ++e) l[e] = row::sanitize(row::guide(l[e], u[e], q.g));
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) l[e] = row::sanitize(l[e]);
  }
  const row::Ban ban = ban_of(P, q);
  const uint32_t x = ban.group(c0, P.V);
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if ((x >> e) & 1u) l[e] = neg_inf();
}

// The token within block `blk` (NG 16-byte groups per lane): team_token over the block's columns
// (approximate Gumbels, each lane keeping its best two, exact float64 scores near the best).
// Returns the token (team-uniform) and its l in *lt.
// A rolled loop over the groups, each re-read (L1): unrolled over registers holding the row, its
// ~45 KB of code missed the instruction cache (ncu, 8 x 1025: 9.5 of 14 cycles per instruction
// "no instruction") and the row's 32 registers spilled.
// CTA (small_plain_kernel<.., true>: kRowWarps warps on one row): warp w takes groups w, w + 8,
// ...; the team reductions go through `sm`.
struct SmallSmem {
  int bb;
  TeamSmem team;  // small_token's team reductions (team_max, team_argmax)
};
template <int DT, int NG, bool CTA = false>
__device__ __forceinline__ int small_token(const SampleParams& P, const Req& q, int row, int blk,
                                           uint32_t pos, int lane, float* lt, SmallSmem* sm = nullptr) {
  constexpr int VEC = Elt<DT>::VEC;
  const int wid = CTA ? (int)(threadIdx.x >> 5) : 0;
  constexpr int JS = CTA ? kRowWarps : 1;  // group stride
  using Team = typename std::conditional<CTA, CtaTeam, WarpTeam>::type;
  Team team{lane};
  if constexpr (CTA) team.sm = &sm->team;
  // (one walk, small_group's loads: a second, unguided 16-byte form of the walk doubled the
  // kernel's code, which team_token instantiates twice; the rare second walk is rolled)
  auto walk = [&](auto f, auto again) {
#pragma unroll 1
    for (int j = wid; j < NG; j += JS) {
      float l[VEC];
      small_group<DT>(P, q, row, blk, j, lane, l);
      const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
      if constexpr (decltype(again)::value) {
#pragma unroll 1
        for (int e = 0; e < VEC; ++e) {
          float le = l[0];
#pragma unroll
          for (int k = 1; k < VEC; ++k)
            if (k == e) le = l[k];
          f(c0 + e, le);
        }
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) f(c0 + e, l[e]);
      }
    }
  };
  return team_token(team, q, pos, walk, [](int, float) { return true; },
                    [&](float l) { return row::temper(l, q.invT); }, lt, P.small_exact_all != 0);
}

// One unfiltered row (request q): small_plain_kernel's work, also run by small_filter_kernel for
// the unfiltered rows of a mixed call (plan.small_joint: its JOINT instantiation, in its form).
// CTA: the CTA's warps on the row (sm: their hand-overs); else the calling warp alone (sm unused).
template <int DT, int NT, bool CTA>
__device__ __forceinline__ void small_plain_row(const SampleParams& P, const Req& q, int row, SmallSmem* sm) {
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  constexpr int N1 = NT > 0 ? NT * VEC : 1;
  const int lane = threadIdx.x & 31;
  const int wid = threadIdx.x >> 5;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : row - q.row_begin);
  const bool need_a = !q.greedy;
  // Warp 0 (every warp of the warp-per-row form): the row in registers, block sums, maximum,
  // runner-up, winning block bb (-1: no token pass, greedy; -2: empty row).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  float Ml = neg_inf(), Ma = 0.f;
  BlockRec rmine{};
  int bb = -1;
  if (!CTA || wid == 0) {
    float l0[32], l1[N1];
    const float M0 = small_load<DT, NJ>(P, q, row, 0, lane, l0);
    float M1 = neg_inf();
    if constexpr (NT > 0) M1 = small_load<DT, NT>(P, q, row, 1, lane, l1);
    const BlockRec r0 = block_sums(P, q, M0, [&](int e) { return l0[e]; });
    BlockRec r1 = r0;
    if constexpr (NT > 0) r1 = block_sums<N1>(P, q, M1, [&](int e) { return l1[e]; });
    t = small_row_top2<DT, NT>(l0, l1, M0, M1, lane);
    Ml = t.m1;
    if (Ml == neg_inf()) {
      if (lane == 0) write_empty(P, row);
      bb = -2;
    } else {
      Ma = need_a ? row::temper(Ml, q.invT) : 0.f;
      // Lane b keeps block b's record for the sums (added after the token: fewer live registers).
      rmine = lane == 0 ? r0 : r1;
      if (need_a) {
        // The winning block: with two non-empty blocks, both exact float64 scores (lanes 0 and
        // 1), ties to the lower block; else the one non-empty block.
        bb = M0 != neg_inf() ? 0 : 1;
        if (NT > 0 && M0 != neg_inf() && M1 != neg_inf()) {
          double sc = 0;
          if (lane < 2) {
            const BlockRec rb = lane == 0 ? r0 : r1;
            sc = ((double)row::temper(rb.maxl, q.invT) + log((double)rb.sa)) +
                 gumbel(q.seed, q.step, pos, (uint32_t)lane, kSaltBlock);
          }
          const double s1 = __shfl_sync(0xffffffffu, sc, 1);
          const double s0 = __shfl_sync(0xffffffffu, sc, 0);
          bb = s1 > s0 ? 1 : 0;
        }
      }
    }
  }
  if constexpr (CTA) {  // every warp passes the same barriers
    if (wid == 0 && lane == 0) sm->bb = bb;
    __syncthreads();
    bb = sm->bb;
  }
  if (bb == -2) return;
  const int amax = t.i1;
  int token = amax;
  float lt = Ml;
  if (bb == 0) token = small_token<DT, NJ, CTA>(P, q, row, 0, pos, lane, &lt, sm);
  else if (bb == 1) {
    if constexpr (NT > 0) token = small_token<DT, NT, CTA>(P, q, row, 1, pos, lane, &lt, sm);
  }
  if (CTA && wid != 0) return;
  // Sums in the warp finish's order: lane b adds block b's terms, then warp_sumd.
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  if (lane == 0 || (NT > 0 && lane == 1))
    add_rec_terms(RecReg{rmine}, need_a, P.stats_guided != 0, q.invT, Ma, Ml, Za, Ea, Zl, El);
  Za = warp_sumd(Za);
  Ea = warp_sumd(Ea);
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
  if (lane != 0) return;
#if defined(__CUDA_ARCH__)
  __builtin_assume(lt == lt);  // (l is never NaN: plain_outputs need not re-read it)
#endif
  plain_outputs<DT>(P, q, row, t, Ml, Ma, amax, token, Za, Ea, Zl, El, lt);
}

// CTA = true (few rows, small_cta_default): one CTA per row; warp 0 does everything but the
// token pass, which all kRowWarps warps share (small_token): a shorter chain per row, the same
// arithmetic, so the same bits as the warp per row.
// MASK: the launch has allowed-token masks (P.allowed); without, the request's mask is a null
// constant and the code is that of a launch without masks (plain_pass_kernel's rule).
template <int DT, int NT, bool CTA, bool MASK>
// Register caps: the warp form 64 (4 CTAs of 256 threads per SM) for rows of one block and a
// short tail (80 measured no faster), 128 with a whole second block; the CTA
// form 128.
__global__ void __launch_bounds__(kRowWarps * 32, CTA ? 2 : (NT <= 1 ? 4 : 2)) small_plain_kernel(const __grid_constant__ SampleParams P) {
  const int wid = threadIdx.x >> 5;
  __shared__ SmallSmem sm;
  const long long row_ll = CTA ? (long long)blockIdx.x : (long long)blockIdx.x * kRowWarps + wid;
  if (row_ll >= P.num_rows) return;
  const int row = (int)row_ll;
  const Req q = row_req<MASK>(P, row);
  if (is_filtered(q, P.V)) return;  // (CTA: the whole CTA, one row)
  small_plain_row<DT, NT, CTA>(P, q, row, &sm);
}

// Filtered rows of V <= 2048 (one block, or one block and a tail; NT as small_plain_kernel): one
// warp per row, in one launch, instead of row_pass_kernel's candidate list (the whole row: 8 KB
// of list writes per row) and cand_finish_kernel's second launch. The warp loads the row
// (small_load), takes its maximum, first argmax column and runner-up from the registers, and
// stores the order-preserving keys of a = l / T in shared memory; then what
// finish_filtered does on its list S runs on those keys, every finite column of the row being S
// (complete): the thresholds (filter_thresholds: a radix select whose last two passes walk a list
// of the columns inside the first digit's bin, fixed-point top-p masses), the kept set listed once
// (the row's candidate area), its sums (integers, so any order gives the same bits) and the two
// block scores, then the token among the winning block's kept columns (list_token: no Philox draw
// for a column not kept). The decisions and sums are finish_filtered's on a complete list, so the
// outputs are its bits (the plan override small_filter=0 selects the general path). The
// choice depends on V only, so batch invariance holds whatever the order of the guided sums
// (block_sums', the same arithmetic as row_pass_kernel's).
// Each row is a CTA of its own (warp form: a CTA of one warp), so that a CTA holds its slot and
// shared memory only while its own row runs: rows of unequal cost (a mixed call's top-p and top-k
// rows) do not wait for each other. A call with unfiltered rows too runs them here as well
// (plan.small_joint: small_plain_row, in this kernel's form), in place of a small_plain_kernel
// launch after this one; the same code, so the same bits.
// CTA = true (few rows, small_filter_cta_default): one row per CTA of kRowWarps
// warps; warp 0 loads the row and writes the outputs, the selects, the kept list, its sums and the
// token search are shared by the warps (CtaTeam). The same decisions and integer sums, so the
// same bits as the warp per row.
struct SmallFiltCta {  // the CTA form's hand-overs
  TeamSmem team;
  Top2 t;
  int nfin, empty;
  float amin;
};
struct SmallFiltCtaJoint : SmallFiltCta {
  SmallSmem plain;  // an unfiltered row's (JOINT)
};
struct SmallFiltWarp {};
template <int DT, int NT, bool CTA, bool JOINT>
struct SmallFiltSmem
    : std::conditional<CTA, typename std::conditional<JOINT, SmallFiltCtaJoint, SmallFiltCta>::type,
                       SmallFiltWarp>::type {
  static constexpr int kCols = kB + NT * 32 * Elt<DT>::VEC;  // columns held (>= V)
  unsigned bins[kWBins * 3];  // 256 counts + 256 u64 masses
  uint32_t key[kCols];        // fkey(a); 0 for -inf
  unsigned lcnt;
};
// MASK: as small_plain_kernel's. JOINT (plan.small_joint): the unfiltered rows too; a launch
// without them has the kernel without their code (in the CTA form their code cost the filtered
// rows 9-21% at 8 x 1025: docs/cuda_sample.md §4).
// The warp form's register cap follows the rows that its shared memory lets an SM hold (a CTA
// of one warp per row): 23 at V = 1025 (f32; bf16 22), so 88 registers (docs/cuda_sample.md §4).
template <int NT>
constexpr int small_filter_warp_ctas() {
  return NT == 0 ? 28 : NT == 1 ? 23 : 20;
}
template <int DT, int NT, bool CTA, bool MASK, bool JOINT>
__global__ void __launch_bounds__(CTA ? kRowWarps * 32 : 32, CTA ? 2 : small_filter_warp_ctas<NT>())
    small_filter_kernel(const __grid_constant__ SampleParams P) {
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  constexpr int N1 = NT > 0 ? NT * VEC : 1;
  constexpr uint32_t kFinite = 0x00800000u;  // keys of finite a are >= fkey(-FLT_MAX)
  using Team = typename std::conditional<CTA, CtaTeam, WarpTeam>::type;
  __shared__ __align__(16) SmallFiltSmem<DT, NT, CTA, JOINT> sm;
  const int lane = threadIdx.x & 31;
  const int wid = threadIdx.x >> 5;
  Team team;
  team.lane = lane;
  if constexpr (CTA) team.sm = &sm.team;
  const int row = (int)blockIdx.x;
  if (row >= P.num_rows) return;
  Req q = row_req<MASK>(P, row);
  if (!is_filtered(q, P.V)) {  // (CTA: the whole CTA, one row)
    if constexpr (JOINT) {
      if constexpr (CTA) small_plain_row<DT, NT, true>(P, q, row, &sm.plain);
      else small_plain_row<DT, NT, false>(P, q, row, nullptr);
    }
    return;
  }
  const int V = P.V;
  const float invT = q.invT;
  uint32_t* skey = sm.key;
  unsigned* hist = sm.bins;
  unsigned long long* hm = reinterpret_cast<unsigned long long*>(sm.bins + kWBins);
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  double Zl = 0, El = 0;
  int nfin = 0;
  bool empty = false;
  if (!CTA || wid == 0) {
    float l0[32], l1[N1];
    const float M0 = small_load<DT, NJ>(P, q, row, 0, lane, l0);
    float M1 = neg_inf();
    if constexpr (NT > 0) M1 = small_load<DT, NT>(P, q, row, 1, lane, l1);
    t = small_row_top2<DT, NT>(l0, l1, M0, M1, lane);
    empty = t.m1 == neg_inf();
    if (empty) {
      if (lane == 0) write_empty(P, row);
    } else {
      if (P.stats_guided) {
        // Guided statistics over K0: the blocks' l-sums (block_sums with the a-sums off), added
        // in finish_filtered's order (lane b: block b).
        Req qg = q;
        qg.greedy = true;
        const BlockRec r0 = block_sums(P, qg, M0, [&](int e) { return l0[e]; });
        BlockRec rb = r0;
        if constexpr (NT > 0) {
          const BlockRec r1 = block_sums<N1>(P, qg, M1, [&](int e) { return l1[e]; });
          if (lane == 1) rb = r1;
        }
        if ((lane == 0 || (NT > 0 && lane == 1)) && rb.maxl != neg_inf())
          guided_terms(rb.maxl, rb.sl, rb.el, t.m1, Zl, El);
        Zl = warp_sumd(Zl);
        El = warp_sumd(El);
      }
      // The keys into shared memory, column-indexed (16-byte stores; columns >= V: -inf, key 0).
      auto key_of = [&](float l) {
        nfin += l != neg_inf() ? 1 : 0;
        return l != neg_inf() ? fkey(row::temper(l, invT)) : 0u;
      };
      // (a block's nj groups of VEC values, l, to the keys from column c0)
      auto store_keys = [&](const float* l, int nj, int c0) {
#pragma unroll
        for (int j = 0; j < nj; ++j)
#pragma unroll
          for (int e = 0; e < VEC; e += 4)
            *reinterpret_cast<uint4*>(skey + c0 + j * 32 * VEC + lane * VEC + e) =
                make_uint4(key_of(l[j * VEC + e]), key_of(l[j * VEC + e + 1]),
                           key_of(l[j * VEC + e + 2]), key_of(l[j * VEC + e + 3]));
      };
      store_keys(l0, NJ, 0);
      if constexpr (NT > 0) store_keys(l1, NT, kB);
      nfin = warp_sumi(nfin);
    }
  }
  float amin = neg_inf();
  float m = 0.f;
  if (!empty && (!CTA || wid == 0)) {
    m = row::temper(t.m1, invT);
    if (q.minp > 0.f) {
      float x = 0.f;
      if (lane == 0) x = minp_threshold(m, (double)m, q.minp);
      amin = __shfl_sync(0xffffffffu, x, 0);
    }
  }
  if constexpr (CTA) {  // warp 0's results to the CTA
    if (wid == 0 && lane == 0) {
      sm.t = t;
      sm.nfin = nfin;
      sm.empty = empty ? 1 : 0;
      sm.amin = amin;
    }
    __syncthreads();
    t = sm.t;
    nfin = sm.nfin;
    empty = sm.empty != 0;
    amin = sm.amin;
    m = row::temper(t.m1, invT);
  } else {
    __syncwarp();
  }
  if (empty) return;
  const float Ml = t.m1;
  const double md = (double)m;
  // The source: every finite column of the row (finish_filtered's S when its lists are complete).
  auto each = [&](auto g) {
#pragma unroll 4
    for (int c = team.rank(); c < V; c += Team::kSize) {
      const uint32_t key = skey[c];
      if (key >= kFinite) g(c, fkey_inv(key), key);
    }
  };
  // The row's candidate area (nblocks x cand_cap >= V entries): the select's list, then the
  // kept columns.
  int2* cl = P.cand + (long long)row * P.nblocks * P.cand_cap;
  // Complete source: nothing lies outside it, so ok and inside always hold (top-k: k < nfin, or
  // top-k is off; top-p: its boundary lies in the source, whose mass is the row's).
  const FiltThr th = filter_thresholds(team, P, q, each, nfin, true, m, md, amin, neg_inf(), hist,
                                       hm, []() { return 0.0; }, cl, &sm.lcnt);
  const Kept in_k{th.kthr, th.cid, amin};
  // The kept columns as a list (c, a): in_k on the keys (a >= amin iff key >= fkey(amin), fkey
  // being order-preserving, the two zeros one key; -inf columns hold key 0). A warp appends its
  // 32-column chunks in column order; the warps' chunks interleave (the list is a set to every
  // use below).
  const uint32_t kmin = max(kFinite, fkey(amin));
  const uint32_t kthr = th.kthr;
  const int cid = th.cid;
  unsigned* lcnt = &sm.lcnt;
  if (CTA && team.rank() == 0) *lcnt = 0u;
  team.sync();
  int nl = 0;  // (warp form: the running count; CTA form: a shared counter per chunk)
  for (int c0 = 32 * team.warp(); c0 < V; c0 += Team::kSize) {
    const int c = c0 + lane;
    const uint32_t key = c < V ? skey[c] : 0u;
    const bool in = (key >= kmin) & ((key > kthr) | ((key == kthr) & (c <= cid)));
    const unsigned bal = __ballot_sync(0xffffffffu, in);
    unsigned base = (unsigned)nl;
    if constexpr (CTA) {
      if (bal == 0u) continue;
      if (lane == 0) base = atomicAdd(lcnt, (unsigned)__popc(bal));
      base = __shfl_sync(0xffffffffu, base, 0);
    } else {
      nl += __popc(bal);
    }
    if (in) cl[base + __popc(bal & ((1u << lane) - 1u))] = make_int2(c, __float_as_int(fkey_inv(key)));
  }
  team.sync();
  __threadfence();
  if constexpr (CTA) nl = (int)*lcnt;
  // Kept sums, per block (the block scores' masses) and in all (integers: any order).
  unsigned long long z0 = 0, z1 = 0;
  long long ef = 0;
  for_list(cl, nl, lane, [&](int c, float a) {
    const unsigned long long ux = kept_terms(a, md, ef);
    if (c < kB) z0 += ux;
    else z1 += ux;
  }, 128 * team.warp() + lane, 128 * (Team::kSize / 32));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    z0 += __shfl_xor_sync(0xffffffffu, z0, o);
    z1 += __shfl_xor_sync(0xffffffffu, z1, o);
    ef += __shfl_xor_sync(0xffffffffu, ef, o);
  }
  if constexpr (CTA) {
    TeamSmem& ts = sm.team;
    if (lane == 0) {
      ts.wz[0][wid] = z0;
      ts.wz[1][wid] = z1;
      ts.wz[2][wid] = (unsigned long long)ef;
    }
    __syncthreads();
    z0 = z1 = 0;
    unsigned long long e2 = 0;
    for (int u = 0; u < kRowWarps; ++u) {
      z0 += ts.wz[0][u];
      z1 += ts.wz[1][u];
      e2 += ts.wz[2][u];
    }
    ef = (long long)e2;
  }
  // The winning block (float64 scores, finish_filtered's), lane b scoring block b (every warp
  // alike).
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : row - q.row_begin);
  double best = 0;
  int bbest = INT_MAX;
  const unsigned long long zb = lane == 0 ? z0 : z1;
  if (lane < P.nblocks && zb != 0ull) {
    const double score = (md + log((double)zb / kMassScale)) +
                         gumbel(q.seed, q.step, pos, (uint32_t)lane, kSaltBlock);
    argmax_merge(best, bbest, score, lane);
  }
  warp_argmax(best, bbest);
  const int bt = list_token(team, q, pos, cl, nl, bbest, in_k, [](float a) { return a; });
  const int token = (bt == INT_MAX) ? t.i1 : bt;
  if (team.rank() == 0)
    filtered_outputs<DT>(P, q, row, token, t.i1, t.m2, Ml, m, th.kthr, th.cid, amin,
                         z0 + z1, ef, nl, Zl, El);
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_SMALL_CUH_
