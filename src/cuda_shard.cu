// Vocabulary-parallel sampling on CUDA (include/dds/dds_shard.h, docs/vocab_parallel.md §8).
//
// One CTA (8 warps) per row and round; the row's per-row decisions (rank order, global statistics,
// filtered-set rule, radix walk, finish) are the shared code of kernels/shard.cuh run by thread 0
// on records pre-summed into shared memory; everything that touches the slice is spread over the
// CTA:
//  * STATS and KEPT: one warp per 1024-id block part of the slice (32 values per lane in
//    registers, 16-byte loads for blocks lying wholly in the slice when aligned), block max /
//    multiset second / first argmax by shuffles, fp32 exp sums relative to the block max (ex2),
//    one 32-byte record per block in shared memory; then warp 0 merges the blocks in order in
//    float64 (sums rescaled to the rank's or the global max), scores the full blocks (float64
//    Gumbels), and warps 0-2 compute the token winners of the best full block and of the cut
//    blocks (approximate fp32 Gumbels, exact float64 ones for the few within the margin).
//    The second-ranked ids of the top-2 are found by a short ordered re-scan of the one or two
//    blocks that can hold them. STATS's top-k candidates: a 4 x 8-bit radix select of the
//    candidate threshold over the slice (re-read), an ordered collection (ties by lower id) and a
//    bitonic sort in shared memory.
//  * RADIX: a 256-bin histogram in shared memory (integer counts; masses exp(a - M) in float64
//    accumulated as 64-bit fixed point, so the atomics are order-independent and the record is
//    deterministic).
//  * finish: one warp per row; thread 0 finishes the row (records only); the warp writes probs.
// No allocation, no host synchronisation, no workspace: graph-safe. The fp32 block sums make the
// records equal to the CPU's up to rounding (block scores, statistics within ~1e-7 relative);
// tokens differ only at counted near-ties, as for dds_sample's GPU path. Slices touching more than
// kMaxBlocks blocks fall back to the first version's kernels (one thread per row, the CPU code).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>

#include "cuda_internal.h"
#include "internal.h"
#include "shard/shard.cuh"
#include "warp.cuh"

namespace dds {
namespace {

using shard::BlockPart;
using shard::Call;
using shard::Cand;
using shard::Col;
using shard::FinishState;
using shard::Global;
using shard::KeptRec;
using shard::KRule;
using shard::RadixRec;
using shard::RadixState;
using shard::Row;
using shard::Share;
using shard::StatsHead;
using shard::Winner;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kB = kBlockSize;        // 1024
constexpr int kMaxBlocks = 1024;      // blocks a slice may touch on the fast path (~1M columns)
constexpr int kCandMax = DDS_SHARD_MAX_TOP_K;  // 1024
constexpr int kSlowThreads = 64;
// Resident CTAs per SM asked of STATS / KEPT. ptxas -v (sm_90, CUDA 13): 2 gave 118 registers and
// no spills on an earlier revision of these kernels; 3 caps them at 80 registers with ~200 bytes
// of spill stores. To be settled by dds_bench_shard.
constexpr int kPassMinBlocks = 2;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ------------------------------------------------------------------------------------------------
// Elements
template <int DT>
struct Elt;
template <>
struct Elt<DDS_DTYPE_F32> {
  using T = float;
  static constexpr int VEC = 4;
  static __device__ __forceinline__ float cvt(float x) { return x; }
};
template <>
struct Elt<DDS_DTYPE_BF16> {
  using T = uint16_t;
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float cvt(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
};
template <>
struct Elt<DDS_DTYPE_F16> {
  using T = uint16_t;
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float cvt(uint16_t h) { return __half2float(__ushort_as_half(h)); }
};

__device__ __forceinline__ float ninf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pinf() { return __int_as_float(0x7f800000); }

// docs/sampling.md §2 exactly as shard::column(): guidance, ban, NaN, +inf.
__device__ __forceinline__ float make_l(float c, float u, bool guided, float g, int col, int banned) {
  float v = c;
  if (guided) v = (c == ninf() || u == ninf()) ? ninf() : __fmaf_rn(g, __fsub_rn(c, u), c);
  if (col == banned) v = ninf();
  if (v != v) v = ninf();
  if (v == pinf()) v = FLT_MAX;
  return v;
}
// a (x) from l: greedy rows use l.
__device__ __forceinline__ float xf(float l, bool greedy, float invT) {
  if (greedy) return l;
  float x = __fmul_rn(l, invT);
  if (x == pinf()) x = FLT_MAX;
  else if (x == ninf() && l > ninf()) x = -FLT_MAX;
  return x;
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ------------------------------------------------------------------------------------------------
// Warp reductions, Top2, argmax_merge, approx_gumbel: kernels/warp.cuh (shared with
// kernels/sample.cuh); warp_mini is this file's own.
using namespace kwarp;
__device__ __forceinline__ int warp_mini(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}


// ------------------------------------------------------------------------------------------------
// Per-row context (shared memory), set up by thread 0.
struct RowCtx {
  Row w;
  Global g;
  KRule k;
  const void* crow;  // the row of the slice (element 0 = global column off)
  const void* urow;  // uncond row of the slice (guided rows)
  bool guided, greedy, sep;  // sep: a is computed apart from l (not greedy, 1/T != 1)
  float invT, gs;
  int active;
  int want_cand;
};

__device__ void setup_row(const Call& c, int32_t i, bool with_order, RowCtx* r) {
  shard::make_row(c, i, with_order, &r->w);
  const shard::Params& q = r->w.q;
  const size_t esz = c.a.dtype == DDS_DTYPE_F32 ? 4 : 2;
  r->crow = static_cast<const char*>(c.a.logits) + (size_t)((int64_t)i * c.a.row_stride) * esz;
  r->guided = q.guided;
  r->urow = q.guided ? static_cast<const char*>(c.a.uncond_logits) +
                           (size_t)((q.uncond_first + r->w.j) * c.a.uncond_row_stride) * esz
                     : nullptr;
  r->greedy = q.greedy;
  r->invT = q.invT;
  r->sep = !q.greedy && q.invT != 1.f;
  r->gs = q.g;
  r->active = 1;
  r->want_cand = 0;
}

template <int DT>
__device__ __forceinline__ float load_l1(const Call& c, const RowCtx& r, int32_t t) {
  using T = typename Elt<DT>::T;
  const float cv = Elt<DT>::cvt(static_cast<const T*>(r.crow)[t]);
  const float u = r.guided ? Elt<DT>::cvt(static_cast<const T*>(r.urow)[t]) : 0.f;
  return make_l(cv, u, r.guided, r.gs, c.off + t, c.a.banned_token);
}

// Calls f(t, l) for every column t of the slice owned by this thread (t = threadIdx.x mod
// blockDim.x), loading kUnroll columns before using any (coalesced, loads in flight together).
constexpr int kUnroll = 8;
template <int DT, class F>
__device__ __forceinline__ void for_cols(const Call& c, const RowCtx& r, F f) {
  const int32_t step = (int32_t)blockDim.x;
  for (int32_t base = 0; base < c.Vs; base += step * kUnroll) {
    float lv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t t = base + u * step + (int32_t)threadIdx.x;
      lv[u] = t < c.Vs ? load_l1<DT>(c, r, t) : ninf();
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t t = base + u * step + (int32_t)threadIdx.x;
      if (t < c.Vs) f(t, lv[u]);
    }
  }
}

// The smallest fp32 x with exp((double)x - M) >= min_p (the device exp is monotone), so that the
// min-p test of every column is one comparison (shard::in_rule with use_xmin).
__device__ void set_min_p_threshold(KRule* k) {
  if (!k->use_min_p) return;
  const double M = k->M, mp = k->min_p;
  float x = (float)(M + log(mp));
  if (x != x) x = -FLT_MAX;
  x = fmaxf(fminf(x, FLT_MAX), -FLT_MAX);
  for (int it = 0; it < 64 && !(exp((double)x - M) >= mp) && x < FLT_MAX; ++it) x = nextafterf(x, FLT_MAX);
  for (int it = 0; it < 64; ++it) {
    const float y = nextafterf(x, -FLT_MAX);
    if (y < x && exp((double)y - M) >= mp) x = y;
    else break;
  }
  k->use_xmin = true;
  k->xmin = x;
}

// ------------------------------------------------------------------------------------------------
// Radix bins of a row, pre-summed over the ranks in offset order (the same order and types as
// shard::GatheredBins: bit-identical sums).
struct SmemBins {
  long long cnt[shard::kRadixRounds][shard::kBins];
  double mass[shard::kRadixRounds][shard::kBins];
  DDS_HD void get(int d, int b, int64_t* c, double* m) const {
    *c = cnt[d][b];
    *m = mass[d][b];
  }
};

__device__ void load_bins(const Call& c, const Row& w, int rounds, SmemBins* sb) {
  for (int idx = threadIdx.x; idx < rounds * shard::kBins; idx += blockDim.x) {
    const int d = idx / shard::kBins, b = idx % shard::kBins;
    int64_t cnt = 0;
    double mass = 0;
    for (int32_t o = 0; o < w.nranks; ++o) {
      const RadixRec& rr =
          *reinterpret_cast<const RadixRec*>(shard::rec(c, c.first_radix + d, w.order[o], w.i));
      cnt += rr.count[b];
      mass += rr.mass[b];
    }
    sb->cnt[d][b] = cnt;
    sb->mass[d][b] = mass;
  }
}

// The ranks' top-k candidate lists of a row merged in order (a desc, id asc) in shared memory: each
// candidate's place is the number of candidates of all lists before it (binary searches in the
// sorted lists), so the whole CTA builds it at once; thread 0 then walks it (SmemMerge) exactly as
// the CPU walks its k-way merge. Rows with more than kMergeMax candidates in all use the gathered
// k-way merge.
constexpr int kMergeMax = 1024;
struct MergeBuf {
  Cand list[kMergeMax];
  Cand merged[kMergeMax];
  int start[shard::kMaxWorld + 1];
  int total;
};
struct SmemMerge {
  const Cand* merged;
  int total, pos;
  DDS_HD void reset() { pos = 0; }
  DDS_HD bool next(Cand* out) {
    if (pos >= total) return false;
    *out = merged[pos++];
    return true;
  }
};
// Returns whether the merged list was built (else the caller uses shard::GatheredMerge).
__device__ bool build_merge(const Call& c, const Row& w, MergeBuf* mb) {
  if (threadIdx.x == 0) {
    int tot = 0;
    for (int32_t o = 0; o < w.nranks; ++o) {
      mb->start[o] = tot;
      int32_t n = shard::stats_of(c, w.order[o], w.i).n_cand;
      n = n < 0 ? 0 : (n > c.C ? c.C : n);
      tot += n;
    }
    mb->start[w.nranks] = tot;
    mb->total = tot;
  }
  __syncthreads();
  const int total = mb->total;
  if (total > kMergeMax) return false;
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    int o = 0;
    while (mb->start[o + 1] <= e) ++o;
    mb->list[e] = shard::cands_of(c, w.order[o], w.i)[e - mb->start[o]];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const Cand x = mb->list[e];
    int rank = 0;
    for (int32_t o = 0; o < w.nranks; ++o) {
      int lo = mb->start[o], hi = mb->start[o + 1];  // first y not before x
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        const Cand y = mb->list[mid];
        if (shard::before(y.a, y.id, x.a, x.id)) lo = mid + 1;
        else hi = mid;
      }
      rank += lo - mb->start[o];
    }
    mb->merged[rank] = x;
  }
  __syncthreads();
  return true;
}

// The row's filtered set (shard::k_rule_base) with the candidate merge built in shared memory.
// Called by all threads; the rule is left in r->k.
__device__ void cta_k_rule(const Call& c, RowCtx* r, MergeBuf* mb, int* s_flag) {
  if (threadIdx.x == 0) {
    r->k = shard::k_rule_base_t<SmemMerge>(c, r->w, r->g, nullptr);
    *s_flag = r->k.cand ? 1 : 0;
  }
  __syncthreads();
  if (!*s_flag) return;
  const bool built = build_merge(c, r->w, mb);
  if (threadIdx.x == 0) {
    if (built) {
      SmemMerge sm{mb->merged, mb->total, 0};
      r->k = shard::k_rule_base_t(c, r->w, r->g, &sm);
    } else {
      r->k = shard::k_rule_base(c, r->w, r->g);
    }
  }
  __syncthreads();
}

// ------------------------------------------------------------------------------------------------
// Ordered CTA scan: the local column of the n-th (0-based) column t (in increasing order) with
// pred(t); -1 if fewer. All threads call it; the result is returned to all.
template <class Pred>
__device__ int32_t cta_nth(int32_t Vs, int64_t n, Pred pred, int* s_warp, int* s_res) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (threadIdx.x == 0) *s_res = -1;
  __syncthreads();
  int64_t seen = 0;
  for (int32_t base = 0; base < Vs; base += blockDim.x) {
    const int32_t t = base + threadIdx.x;
    const bool f = t < Vs && pred(t);
    const unsigned bal = __ballot_sync(0xffffffffu, f);
    if (lane == 0) s_warp[wid] = __popc(bal);
    __syncthreads();
    int before = 0, total = 0;
    for (int x = 0; x < (int)(blockDim.x >> 5); ++x) {
      if (x < wid) before += s_warp[x];
      total += s_warp[x];
    }
    if (f) {
      const int64_t idx = seen + before + __popc(bal & ((1u << lane) - 1u));
      if (idx == n) *s_res = t;
    }
    seen += total;
    __syncthreads();
    if (seen > n) break;
  }
  __syncthreads();
  return *s_res;
}

// The radix rule's last kept tie on this rank (shard::localize, CTA-parallel).
template <int DT>
__device__ void cta_localize(const Call& c, RowCtx* r, int* s_warp, int* s_res, int* s_flag,
                             long long* s_keep) {
  if (threadIdx.x == 0) {
    *s_flag = 0;
    KRule& k = r->k;
    if (k.radix && k.has_thr) {
      int64_t mine;
      const int64_t keep = shard::localize_keep(c, r->w, k, &mine);
      if (keep <= 0) k.id_thr = c.off - 1;
      else if (keep >= mine) k.id_thr = c.off + c.Vs - 1;  // all of this rank's ties
      else {
        *s_flag = 1;
        *s_keep = keep;
      }
    }
  }
  __syncthreads();
  if (!*s_flag) return;
  const uint32_t vkey = r->k.vkey;
  const RowCtx& rr = *r;
  const int32_t t = cta_nth(
      c.Vs, *s_keep - 1,
      [&](int32_t t) {
        const float l = load_l1<DT>(c, rr, t);
        return l > ninf() && shard::order_key(xf(l, rr.greedy, rr.invT)) == vkey;
      },
      s_warp, s_res);
  if (threadIdx.x == 0) r->k.id_thr = t >= 0 ? c.off + t : c.off + c.Vs - 1;
  __syncthreads();
}

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

template <int DT>
__device__ __forceinline__ int col_of(int blk, int lane, int e) {
  constexpr int VEC = Elt<DT>::VEC;
  return blk * kB + (e / VEC) * 32 * VEC + lane * VEC + (e % VEC);
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
  const int banned = c.a.banned_token;
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
          lv[j * VEC + q] = make_l(Elt<DT>::cvt(ce[q]), Elt<DT>::cvt(ue[q]), true, r.gs,
                                   b0 + j * 32 * VEC + lane * VEC + q, banned);
      }
    } else {
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const T* ce = reinterpret_cast<const T*>(&cv[j]);
#pragma unroll
        for (int q = 0; q < VEC; ++q)
          lv[j * VEC + q] = make_l(Elt<DT>::cvt(ce[q]), 0.f, false, 0.f,
                                   b0 + j * 32 * VEC + lane * VEC + q, banned);
      }
    }
    return;
  }
  const int32_t lo = b0 > c.off ? b0 : c.off;
  const int32_t hi = (b0 + kB < c.off + c.Vs) ? b0 + kB : c.off + c.Vs;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const int col = col_of<DT>(blk, lane, e);
    float v = ninf();
    if (col >= lo && col < hi) {
      const float cv1 = Elt<DT>::cvt(cr[col - c.off]);
      const float u = r.guided ? Elt<DT>::cvt(ur[col - c.off]) : 0.f;
      v = make_l(cv1, u, r.guided, r.gs, col, banned);
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
      col.in0 = lv[e] > ninf();
      col.x = xf(lv[e], r.greedy, r.invT);
      lv[e] = shard::in_rule(r.k, col, col_of<DT>(blk, lane, e)) ? col.x : ninf();
    }
  }
  float m1 = ninf(), m2 = ninf();
  int cnt = 0;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    if (!KEPT) m2 = fmaxf(m2, fminf(m1, lv[e]));
    m1 = fmaxf(m1, lv[e]);
    cnt += lv[e] > ninf();
  }
  const float M = warp_max(m1);
  BlkRec rec;
  rec.m1 = M;
  rec.cnt = warp_sumi(cnt);
  rec.sec = ninf();
  rec.amax = INT_MAX;
  rec.sl = rec.el = rec.sa = rec.ea = 0.f;
  if (!KEPT) {
    const unsigned at_max = __ballot_sync(0xffffffffu, m1 == M);
    float sec = (m1 == M) ? m2 : m1;
    sec = warp_max(sec);
    if (__popc(at_max) > 1) sec = M;
    rec.sec = sec;
    int amax = INT_MAX;
    if (m1 == M && M != ninf()) {
#pragma unroll
      for (int e = 31; e >= 0; --e)
        if (lv[e] == M) amax = col_of<DT>(blk, lane, e);
    }
    rec.amax = warp_mini(amax);
  }
  if (M != ninf()) {
    float s = 0.f, en = 0.f;
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const float d = fmaxf((lv[e] - M) * kLog2e, -1000.f);
      const float x = ex2(d);
      s += x;
      en = fmaf(x, d, en);
    }
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
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          const float d = fmaxf((xf(lv[e], false, r.invT) - ma) * kLog2e, -1000.f);
          const float x = ex2(d);
          s2 += x;
          en2 = fmaf(x, d, en2);
        }
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
      xv[e] = col < hi ? load_l1<DT>(c, r, col - c.off) : ninf();
    }
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const float l = xv[e];
      const bool m = l > ninf() && (kind_a ? xf(l, r.greedy, r.invT) : l) == v;
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
  float sf[32];
  float bf = ninf();
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    const int32_t col = lo + e * 32 + lane;
    float v = ninf();
    if (col < hi) {
      Col cl;
      cl.l = load_l1<DT>(c, r, col - c.off);
      cl.in0 = cl.l > ninf();
      cl.x = xf(cl.l, r.greedy, r.invT);
      if (shard::in_rule(k, cl, col))  // finite: |a| <= FLT_MAX, |G| < 37
        v = cl.x + approx_gumbel(random_bits(q.seed, q.step, r.w.pos, (uint32_t)col, kSaltToken));
    }
    sf[e] = v;
    bf = fmaxf(bf, v);
  }
  bf = warp_max(bf);
  Winner w = shard::no_winner();
  if (bf == ninf()) return w;
  const float thr = bf - approx_margin(bf);
  double bv = 0;
  int bt = INT_MAX;
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    // (thr may round to -inf at |a| ~ FLT_MAX: excluded columns stay out explicitly)
    if (sf[e] == ninf() || !(sf[e] >= thr)) continue;
    const int32_t col = lo + e * 32 + lane;
    const float l = load_l1<DT>(c, r, col - c.off);
    const double v = (double)xf(l, r.greedy, r.invT) + gumbel(q.seed, q.step, r.w.pos, (uint32_t)col, kSaltToken);
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
      if (!(l > ninf())) return;
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
      if (!(l > ninf())) return;
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
      if (l > ninf()) {
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
    Top2 t{ninf(), INT_MAX, ninf()};
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

// ------------------------------------------------------------------------------------------------
// Round KEPT.
template <int DT>
__global__ void __launch_bounds__(kThreads, kPassMinBlocks) kept_kernel(const __grid_constant__ Call c, unsigned char* out) {
  __shared__ PassSmem S;
  const int i = blockIdx.x;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  KeptRec& kr = *reinterpret_cast<KeptRec*>(out + c.row_bytes[c.kept_round] * i);
  if (threadIdx.x == 0) {
    setup_row(c, i, true, &S.r);
    S.r.g = shard::global_stats(c, S.r.w);
  }
  __syncthreads();
  cta_k_rule(c, &S.r, &S.u.merge, &S.misc[5]);
  if (threadIdx.x == 0) S.flag = S.r.k.filtered ? 1 : 0;
  __syncthreads();
  if (!S.flag) {
    if (threadIdx.x == 0) {
      memset(&kr, 0, sizeof kr);
      shard::clear_share(&kr.share, 0);
    }
    return;
  }
  if (S.r.k.radix && c.first_radix >= 0) {
    load_bins(c, S.r.w, shard::kRadixRounds, &S.u.bins);
    __syncthreads();
    if (threadIdx.x == 0) shard::k_rule_radix(c, S.r.w, S.r.g, S.u.bins, &S.r.k);
  }
  if (threadIdx.x == 0) set_min_p_threshold(&S.r.k);
  __syncthreads();
  cta_localize<DT>(c, &S.r, S.warp_cnt, &S.res, &S.misc[0], &S.keep);
  __syncthreads();
  const Geo gm = geo(c);
  for (int bi = wid; bi < gm.nblk; bi += kWarps)
    block_pass<DT, true>(c, S.r, gm.b_first + bi, lane, &S.u.recs[bi]);
  __syncthreads();
  const double M = S.r.k.M;
  if (wid == 0) {
    int cnt = 0;
    double z = 0, w = 0;
    for (int bi = lane; bi < gm.nblk; bi += 32) {
      const BlkRec& br = S.u.recs[bi];
      if (br.cnt == 0) continue;
      cnt += br.cnt;
      const double d = (double)br.m1 - M, f = exp(d);
      z += (double)br.sa * f;
      w += f * ((double)br.ea + d * (double)br.sa);
    }
    cnt = warp_sumi(cnt);
    z = warp_sumd(z);
    w = warp_sumd(w);
    if (lane == 0) {
      kr.count = cnt;
      kr.pad = 0;
      kr.z = z;
      kr.w = w;
    }
  }
  __syncthreads();
  make_share_cta<DT, true>(c, S, gm, S.r.k, M, &kr.share);
}

// ------------------------------------------------------------------------------------------------
// Rounds RADIX.
struct RadixSmem {
  RowCtx r;
  SmemBins bins;
  unsigned cnt[shard::kBins];
  unsigned long long mass[shard::kBins];
  int flag;
  uint32_t prefix;
};

template <int DT>
__global__ void __launch_bounds__(kThreads, 2) radix_kernel(const __grid_constant__ Call c, int32_t round,
                                                         unsigned char* out) {
  __shared__ RadixSmem S;
  const int i = blockIdx.x;
  RadixRec& rr = *reinterpret_cast<RadixRec*>(out + c.row_bytes[round] * i);
  const int d = round - c.first_radix;
  if (threadIdx.x == 0) {
    setup_row(c, i, true, &S.r);
    S.r.g = shard::global_stats(c, S.r.w);
    S.r.k = shard::k_rule_base_t<SmemMerge>(c, S.r.w, S.r.g, nullptr);  // only its kind
    S.flag = S.r.k.radix ? 1 : 0;
    S.prefix = 0;
  }
  for (int b = threadIdx.x; b < shard::kBins; b += blockDim.x) {
    S.cnt[b] = 0;
    S.mass[b] = 0ull;
  }
  __syncthreads();
  if (S.flag && d > 0) {
    load_bins(c, S.r.w, d, &S.bins);
    __syncthreads();
    if (threadIdx.x == 0) {
      const double target = (double)S.r.w.q.p * shard::radix_z1(S.bins);
      const RadixState s = shard::radix_walk(S.bins, target, d);
      if (s.keep_all) S.flag = 0;
      S.prefix = s.prefix;
    }
    __syncthreads();
  }
  if (S.flag) {
    const RowCtx& r = S.r;
    const double Ma = r.g.Ma;
    const int bits = 32 - __clz(c.Vs);
    const double scale = ldexp(1.0, 63 - bits);
    const int shift = 24 - 8 * d;
    const uint32_t prefix = S.prefix;
    for_cols<DT>(c, r, [&](int32_t, float l) {
      if (!(l > ninf())) return;
      const float x = xf(l, r.greedy, r.invT);
      const uint32_t key = shard::order_key(x);
      if (d > 0 && (key >> (shift + 8)) != prefix) return;
      const uint32_t bin = (key >> shift) & 255u;
      atomicAdd(&S.cnt[bin], 1u);
      atomicAdd(&S.mass[bin], __double2ull_rn(exp((double)x - Ma) * scale));
    });
    __syncthreads();
    const double inv = ldexp(1.0, bits - 63);
    for (int b = threadIdx.x; b < shard::kBins; b += blockDim.x) {
      rr.count[b] = S.cnt[b];
      rr.mass[b] = (double)S.mass[b] * inv;
    }
  } else {
    for (int b = threadIdx.x; b < shard::kBins; b += blockDim.x) {
      rr.count[b] = 0;
      rr.mass[b] = 0.0;
    }
  }
}

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
    if (S.f.empty && c.a.request_status)
      atomicOr(&c.a.request_status[S.r.w.req], (int)DDS_REQ_EMPTY_ROW);
    S.r.k = S.f.k;
    set_min_p_threshold(&S.r.k);
  }
  __syncthreads();
  if (!c.a.probs) return;
  cta_localize<DT>(c, &S.r, S.warp_cnt, &S.res, &S.flag, &S.keep);
  if (threadIdx.x == 0) S.f.k = S.r.k;
  __syncthreads();
  const int64_t base = (int64_t)i * c.a.probs_row_stride;
  const RowCtx& r = S.r;
  const FinishState& f = S.f;
  for_cols<DT>(c, r, [&](int32_t t, float l) {
    Col col;
    col.l = l;
    col.in0 = l > ninf();
    col.x = xf(l, r.greedy, r.invT);
    shard::store_val(c.a.probs, c.a.probs_dtype, base + t, shard::finish_prob_col(f, col, c.off + t));
  });
}

__global__ void shard_status_kernel(const __grid_constant__ Call c) {
  const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= c.a.num_requests) return;
  c.a.request_status[r] = shard::call_params(c, r).status;
}

// ------------------------------------------------------------------------------------------------
// First version (one thread per row, the CPU's per-row code): partial rounds of slices touching
// more than kMaxBlocks blocks.
__global__ void slow_partial_kernel(const __grid_constant__ Call c, int32_t round, int32_t kind,
                                    unsigned char* out) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c.a.num_rows) return;
  unsigned char* rowp = out + c.row_bytes[round] * i;
  if (kind == DDS_SHARD_ROUND_STATS) shard::partial_stats_row(c, i, rowp);
  else if (kind == DDS_SHARD_ROUND_RADIX) shard::partial_radix_row(c, round, i, rowp);
  else shard::partial_kept_row(c, i, rowp);
}

bool fast_path(const Call& c) {
  const int32_t nblk = (c.off + c.Vs - 1) / kB - c.off / kB + 1;
  return nblk <= kMaxBlocks;
}

template <int DT>
void launch_partial(const Call& c, int32_t round, int32_t kind, unsigned char* out, cudaStream_t s) {
  const unsigned grid = (unsigned)c.a.num_rows;
  if (kind == DDS_SHARD_ROUND_STATS) stats_kernel<DT><<<grid, kThreads, 0, s>>>(c, out);
  else if (kind == DDS_SHARD_ROUND_RADIX) radix_kernel<DT><<<grid, kThreads, 0, s>>>(c, round, out);
  else kept_kernel<DT><<<grid, kThreads, 0, s>>>(c, out);
}

// Makes the sampler's device current for the call and restores the caller's afterwards.
struct DeviceGuard {
  int prev = -1;
  cudaError_t err = cudaSuccess;
  explicit DeviceGuard(int dev) {
    cudaGetDevice(&prev);
    if (prev != dev) err = cudaSetDevice(dev);
  }
  ~DeviceGuard() {
    int cur = -1;
    cudaGetDevice(&cur);
    if (prev >= 0 && cur != prev) cudaSetDevice(prev);
  }
};

dds_status device_error(const char* fn, int device, cudaError_t e) {
  return fail(DDS_ERR_CUDA, "%s: cudaSetDevice(%d) failed: %s", fn, device, cudaGetErrorString(e));
}

}  // namespace

dds_status cuda_shard_partial(const shard::Call& c, int32_t round, void* record_out, int device,
                              dds_stream stream) {
  const char* fn = "dds_sample_partial";
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return device_error(fn, device, guard.err);
  const int32_t kind = round == 0 ? DDS_SHARD_ROUND_STATS
                       : round == c.kept_round ? DDS_SHARD_ROUND_KEPT
                                               : DDS_SHARD_ROUND_RADIX;
  unsigned char* out = static_cast<unsigned char*>(record_out);
  const cudaStream_t s = (cudaStream_t)stream;
  if (!fast_path(c)) {
    const int blocks = (c.a.num_rows + kSlowThreads - 1) / kSlowThreads;
    slow_partial_kernel<<<blocks, kSlowThreads, 0, s>>>(c, round, kind, out);
    return check_launch(fn);
  }
  switch (c.a.dtype) {
    case DDS_DTYPE_F32: launch_partial<DDS_DTYPE_F32>(c, round, kind, out, s); break;
    case DDS_DTYPE_BF16: launch_partial<DDS_DTYPE_BF16>(c, round, kind, out, s); break;
    default: launch_partial<DDS_DTYPE_F16>(c, round, kind, out, s); break;
  }
  return check_launch(fn);
}

dds_status cuda_shard_finish(const shard::Call& c, int device, dds_stream stream) {
  const char* fn = "dds_sample_finish";
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return device_error(fn, device, guard.err);
  const cudaStream_t s = (cudaStream_t)stream;
  dds_status st = DDS_OK;
  if (c.a.request_status) {
    shard_status_kernel<<<(c.a.num_requests + kSlowThreads - 1) / kSlowThreads, kSlowThreads, 0, s>>>(c);
    if ((st = check_launch(fn)) != DDS_OK) return st;
  }
  const unsigned grid = (unsigned)c.a.num_rows;
  switch (c.a.dtype) {
    case DDS_DTYPE_F32: finish_kernel<DDS_DTYPE_F32><<<grid, kFinishThreads, 0, s>>>(c); break;
    case DDS_DTYPE_BF16: finish_kernel<DDS_DTYPE_BF16><<<grid, kFinishThreads, 0, s>>>(c); break;
    default: finish_kernel<DDS_DTYPE_F16><<<grid, kFinishThreads, 0, s>>>(c); break;
  }
  return check_launch(fn);
}

}  // namespace dds
