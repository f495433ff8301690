// Vocabulary-parallel kernels (kernels/shard/shard.cuh): shapes, element access, and the per-row
// machinery every kernel of the family shares: the row context in shared memory (RowCtx, set up by
// thread 0 from the host/device logic), column loops over the slice, the min-p threshold as one
// fp32 comparison, the radix bins and the top-k candidate merge pre-built in shared memory (the
// same sums and order as the gathered forms of kernels/shard/rule.h), ordered CTA scans.
#ifndef DDS_KERNELS_SHARD_CTA_CUH_
#define DDS_KERNELS_SHARD_CTA_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>

#include "../common/warp.cuh"
#include "../sample/row.cuh"
#include "finish_row.h"

namespace dds {
namespace kshard {

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
constexpr int kCandMax = shard::kMaxTopK;  // 1024
constexpr int kSlowThreads = 64;
// Resident CTAs per SM asked of STATS / KEPT. ptxas -v (sm_90, CUDA 13): 2 gave 118 registers and
// no spills on an earlier revision of these kernels; 3 caps them at 80 registers with ~200 bytes
// of spill stores. To be settled by dds_bench_shard.
constexpr int kPassMinBlocks = 2;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ------------------------------------------------------------------------------------------------
// Elements: Elt, neg_inf and the §2 transform (row::make_l) from kernels/common/row.h; xf and
// ban_of from shard/row.h (host and device); col_of from kernels/sample/row.cuh.
using ksample::col_of;
using dds::ex2;
using shard::xf;
using shard::ban_of;

// Warp reductions, Top2, argmax_merge, approx_gumbel: kernels/common/warp.cuh (shared with
// kernels/sample/).
using namespace kwarp;
__device__ __forceinline__ int warp_mini(int v) {
  return warp_reduce(v, [](int a, int b) { return min(a, b); });
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

__device__ inline void setup_row(const Call& c, int32_t i, bool with_order, RowCtx* r) {
  shard::make_row(c, i, with_order, &r->w);
  const shard::Params& q = r->w.q;
  const size_t esz = c.a.dtype == shard::kF32 ? 4 : 2;
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
  return row::make_l(cv, u, r.guided, r.gs, c.off + t, ban_of(c.a));
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
      lv[u] = t < c.Vs ? load_l1<DT>(c, r, t) : neg_inf();
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
__device__ inline void set_min_p_threshold(KRule* k) {
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

__device__ inline void load_bins(const Call& c, const Row& w, int rounds, SmemBins* sb) {
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
__device__ inline bool build_merge(const Call& c, const Row& w, MergeBuf* mb) {
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
__device__ inline void cta_k_rule(const Call& c, RowCtx* r, MergeBuf* mb, int* s_flag) {
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
        return l > neg_inf() && shard::order_key(xf(l, rr.greedy, rr.invT)) == vkey;
      },
      s_warp, s_res);
  if (threadIdx.x == 0) r->k.id_thr = t >= 0 ? c.off + t : c.off + c.Vs - 1;
  __syncthreads();
}

}  // namespace kshard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_CTA_CUH_
