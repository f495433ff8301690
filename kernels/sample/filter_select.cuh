// The machinery of filter_kernel (filter_cta.cuh) and the split fallback's first digit
// (split_filter.cuh): the CTA's shared memory (FilterSmem), the element sources (RowSrc: the row
// in shared memory or re-read; CandSrc: a list), the radix decision of one pass (radix_pick) and
// the CTA radix select over a source (radix_select), the CTA reductions (cta_argmax, cta_max) and
// the CTA as a team for team_token (FilterTeam).
#ifndef DDS_KERNELS_SAMPLE_FILTER_SELECT_CUH_
#define DDS_KERNELS_SAMPLE_FILTER_SELECT_CUH_

#include "small.cuh"

namespace dds {
namespace ksample {

constexpr int kCandCap = 4096;  // candidate list of the filter kernel (ids + l values)
// Rows longer than kSmemRowMax are not held in shared memory: that space then holds a longer list
// (the boundary digit's columns of a wide top-p nucleus), ids then l values.
constexpr int kBigListCap = kSmemRowMax / 2;
// The most columns a wide top-p nucleus's boundary digit may hold for its list (filter_kernel's
// boundary pass, the split fallback's); a wider digit takes the radix passes over the row. A
// function of V alone, so that every plan takes the same way, and the same sums, for a row:
// kCandCap up to kSmemRowMax columns, where filter_kernel may hold the row in shared memory beside
// a list of that size; kBigListCap above.
__host__ __device__ constexpr int wide_list_cap(int V) {
  return V <= kSmemRowMax ? kCandCap : kBigListCap;
}

struct FilterSmem {
  float tmax[kFilterThreads];  // per-thread maxima of l (pass 1)
  int cand_id[kCandCap];
  float cand_l[kCandCap];
  int ncand;
  uint32_t cnt[kHistBins];
  uint32_t mlo[kHistBins];  // bin masses (radix_select, mode 1): low and high 32-bit words
  uint32_t mhi[kHistBins];
  unsigned long long red64[128];  // 64-bit reduction scratch (four 32-warp arrays)
  double redd[32];
  int redi[32];
  float redf[32];
  float redf2[32];
  double resd[4];
  float resf[3];
  float resl;  // team_argmax's hand-over of the token's l
  int resi;
  int resn;
  uint32_t sel_key;
  unsigned long long sel_above_mass;
  int sel_above_cnt;
  int sel_eq_cnt;
  unsigned long long sel_eq_mass;
  double sel_target;  // mode 1 target of the last radix_select (frac >= 0: computed there)
  uint32_t sel_prefix, sel_pmask;  // radix_select stopped before its last pass: its state
};

constexpr int kUnroll = 2;                       // groups of VEC columns in flight per thread

// Element source for the filter kernel: the shared-memory row or the logits in global memory.
// Thread `tid` visits groups of VEC consecutive columns at tid*VEC + n*blockDim*VEC.
template <int DT>
struct RowSrc {
  const typename Elt<DT>::T* crow;
  const typename Elt<DT>::T* urow;
  const float* srow;
  bool guided, vec;
  float g;
  row::Ban ban;
  int V;
  __device__ __forceinline__ float l(int t) const {
    if (srow) return srow[t];
    const float c = Elt<DT>::cvt(crow[t]);
    const float u = guided ? Elt<DT>::cvt(urow[t]) : 0.f;
    return row::make_l(c, u, guided, g, t, ban);
  }
  __device__ __forceinline__ void group(int base, float (&out)[Elt<DT>::VEC]) const {
    constexpr int VEC = Elt<DT>::VEC;
    if (srow) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = (base + e < V) ? srow[base + e] : neg_inf();
      return;
    }
    float c[VEC];
    load_vec<DT>(crow, base, V, vec, c);
    const uint32_t x = ban.group(base, V);
    if (guided) {
      float u[VEC];
      load_vec<DT>(urow, base, V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = row::make_l(c[e], u[e], true, g, x, e);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = row::make_l(c[e], 0.f, false, 0.f, x, e);
    }
  }
  // f(base, lv) for each group of VEC columns at base (thread tid: tid * VEC + n * blockDim.x *
  // VEC), kUnroll groups loaded before f runs on them, while the group's warp chunk (base - lane *
  // VEC, warp-uniform) starts below Vr; lv[e] is column base + e's l (neg_inf() from V on).
  template <typename F>
  __device__ __forceinline__ void for_each_group(int Vr, F f) const {
    constexpr int VEC = Elt<DT>::VEC;
    const int step = blockDim.x * VEC;
    const int lane = threadIdx.x & 31;
    for (int b0 = threadIdx.x * VEC; b0 < Vr; b0 += step * kUnroll) {
      float lv[kUnroll][VEC];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) group(b0 + k * step, lv[k]);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int base = b0 + k * step;
        if (base - lane * VEC >= Vr) break;
        f(base, lv[k]);
      }
    }
  }
  // f(t, l) for every column t < V of the row (any order).
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
    constexpr int VEC = Elt<DT>::VEC;
    const int step = blockDim.x * VEC;
    for (int b0 = threadIdx.x * VEC; b0 < V; b0 += step * kUnroll) {
      float lv[kUnroll][VEC];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) group(b0 + k * step, lv[k]);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const int t = b0 + k * step + e;
          if (t < V) f(t, lv[k][e]);
        }
    }
  }
};

// A list source: (id[j], l[j]) for j < n (id == nullptr: id = j). Same for_each contract.
struct CandSrc {
  const int* id;
  const float* l;
  int n;
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
    for (int j = threadIdx.x; j < n; j += blockDim.x) f(id ? id[j] : j, l[j]);
  }
};

// One radix pass's decision over its histogram in sm.cnt / mlo / mhi (nbins bins), by the whole
// CTA (every thread calls it): the bin where the count (mode 0: reaching `need`) or the
// fixed-point mass (mode 1: reaching `target`; frac0 >= 0: target = frac0 x the histogram's whole
// mass, set here in warp 0) accumulated from the top, on top of above_cnt / above_mass, is first
// reached. Results in sm: sel_key (the bin), sel_above_cnt / sel_above_mass (above it),
// sel_eq_cnt / sel_eq_mass (in it), sel_target. radix_select's passes and the split fallback's
// first digit (split_filter.cuh, over the row's histogram summed by several CTAs) decide with it.
// The bins are 32 segments of nbins / 32 from the top (bin_prefix's lanes): the CTA's warps add
// the segments' counts and masses and find their lowest non-empty bins (warp w: segments w,
// w + warps, ...; lane i reads bins top - i - 32 j, consecutive words), into the scratch c_s,
// m_s, ne_s (32 entries each, shared); warp 0 picks the segment as goal_lane does and walks it 32
// bins at a time with goal_bin's rule (the first non-empty bin that reaches the goal, else the
// segment's lowest non-empty bin). Integer sums and the same comparisons: the decision does not
// depend on how the bins are shared out. (One lane per segment scanning its bins in turn put the
// 32 lanes' loads in one shared-memory bank, while the CTA's other warps waited at the barrier.)
// Not inlined: one copy per shared-memory layout instead of one in each of radix_select's
// instantiations (inlined, filter_kernel's code grew by 28% and its parameter block was copied
// to the stack, 1.2 KB per thread).
template <class Sm>
__device__ __noinline__ void radix_pick(Sm& sm, int nbins, int mode, long long need, double& target,
                                           double frac0, long long above_cnt,
                                           unsigned long long above_mass, unsigned long long* c_s,
                                           unsigned long long* m_s, int* ne_s) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
  const int per = nbins / 32;
  for (int g = warp; g < 32; g += nw) {
    const int top = nbins - 1 - g * per;
    unsigned long long c = 0, m = 0;
    int ne = INT_MAX;
    for (int j = lane; j < per; j += 32) {
      const int b = top - j;
      const uint32_t n = sm.cnt[b];
      c += n;
      if (mode == 1) m += mass_at(sm.mlo, sm.mhi, b);
      if (n) ne = b;
    }
    c = warp_sum_of(c);
    m = warp_sum_of(m);
    ne = warp_reduce(ne, [](int x, int y) { return min(x, y); });
    if (lane == 0) {
      c_s[g] = c;
      m_s[g] = m;
      ne_s[g] = ne == INT_MAX ? -1 : ne;
    }
  }
  __syncthreads();
  if (warp != 0) return;
  BinPrefix bp{(long long)c_s[lane], 0, m_s[lane], 0ull, ne_s[lane]};
  bin_scan(bp, lane);
  if (mode == 1 && frac0 >= 0.0) target = frac0 * (double)__shfl_sync(kAll, bp.pm, 31);  // every column is in
  const int srcl = goal_lane(bp, mode, above_cnt, need, above_mass, target);
  long long c = above_cnt + __shfl_sync(kAll, bp.pc - bp.lc, srcl);
  unsigned long long m = above_mass + __shfl_sync(kAll, bp.pm - bp.lm, srcl);
  const int last_ne = __shfl_sync(kAll, bp.last_ne, srcl);
  const int hi = nbins - 1 - srcl * per;
  int chosen = last_ne < 0 ? hi : last_ne;
  for (int j0 = 0; j0 < per; j0 += 32) {
    const int b = hi - j0 - lane;
    const uint32_t n = j0 + lane < per ? sm.cnt[b] : 0u;
    const unsigned long long mb = (mode == 1 && n) ? mass_at(sm.mlo, sm.mhi, b) : 0ull;
    BinPrefix sb{(long long)n, 0, mb, 0ull, -1};  // inclusive prefixes over the lanes (from the top)
    bin_scan(sb, lane);
    const long long ci = sb.pc;
    const unsigned long long mi = sb.pm;
    const bool reach =
        n != 0u && (b == last_ne || (mode == 0 ? c + ci >= need : (double)(m + mi) >= target));
    const unsigned hit = __ballot_sync(kAll, reach);
    if (hit) {
      const int L = __ffs(hit) - 1;
      chosen = hi - j0 - L;
      c += __shfl_sync(kAll, ci - (long long)n, L);
      m += __shfl_sync(kAll, mi - mb, L);
      break;
    }
    c += __shfl_sync(kAll, ci, 31);
    m += __shfl_sync(kAll, mi, 31);
  }
  if (lane == 0) {
    sm.sel_key = (uint32_t)chosen;
    sm.sel_above_cnt = (int)c;
    sm.sel_above_mass = m;
    sm.sel_eq_cnt = (int)sm.cnt[chosen];
    sm.sel_eq_mass = mode == 1 ? mass_at(sm.mlo, sm.mhi, chosen) : 0ull;
    sm.sel_target = target;
  }
}

// CTA-wide radix select: among the columns for which f(t, l, &key) returns true, finds the key
// K at which the count (mode 0: reaching `need`) or the fixed-point mass mf(key) (mode 1:
// reaching `target`; frac >= 0: target = frac x the mass of every such column, computed in the
// first pass) accumulated from the largest key down first reaches the goal. The mass is computed
// only for columns inside the current prefix (first pass: all of them; later passes: one bin's).
// Results in sm: sel_key = K, sel_above_cnt / sel_above_mass = strictly above K, sel_eq_cnt =
// count at K. Passes [pass_begin, pass_end) of the three (digits of 11, 11, 10 bits) only: a call
// that stops early leaves its state (sel_prefix / sel_pmask, the chosen digit's bin in sel_key,
// the sums above it, sel_target) for a call that resumes at pass_end, e.g. on another source.
template <typename Src, typename F, typename MF = NoMass>
__device__ void radix_select(FilterSmem& sm, const Src& src, int mode, long long need,
                             double target, F f, MF mf = MF{}, double frac = -1.0,
                             int pass_begin = 0, int pass_end = 3) {
  const int tid = threadIdx.x;
  uint32_t prefix = 0, pmask = 0;
  long long above_cnt = 0;
  unsigned long long above_mass = 0;
  if (pass_begin > 0) {
    prefix = sm.sel_prefix;
    pmask = sm.sel_pmask;
    above_cnt = sm.sel_above_cnt;
    above_mass = sm.sel_above_mass;
    target = sm.sel_target;
    __syncthreads();
  }
  const int shifts[3] = {21, 10, 0};
  const int widths[3] = {11, 11, 10};
  for (int pass = pass_begin; pass < pass_end; ++pass) {
    const int sh = shifts[pass];
    const uint32_t wmask = (1u << widths[pass]) - 1u;
    for (int i = tid; i < kHistBins; i += blockDim.x) {
      sm.cnt[i] = 0;
      sm.mlo[i] = 0;
      sm.mhi[i] = 0;
    }
    __syncthreads();
    src.for_each([&](int t, float l) {
      uint32_t key;
      if (!f(t, l, key)) return;
      if ((key & pmask) != prefix) return;
      const uint32_t bin = (key >> sh) & wmask;
      atomicAdd(&sm.cnt[bin], 1u);
      if (mode == 1) mass_add(sm.mlo, sm.mhi, bin, mf(key));
    });
    __syncthreads();
    radix_pick(sm, (int)wmask + 1, mode, need, target, pass == 0 ? frac : -1.0, above_cnt, above_mass,
               sm.red64, sm.red64 + 32, sm.redi);
    __syncthreads();
    prefix |= sm.sel_key << sh;
    pmask |= wmask << sh;
    above_cnt = sm.sel_above_cnt;
    above_mass = sm.sel_above_mass;
    __syncthreads();
  }
  if (pass_end < 3) {
    if (tid == 0) {
      sm.sel_prefix = prefix;
      sm.sel_pmask = pmask;
    }
  } else if (tid == 0) {
    sm.sel_key = prefix;
  }
  __syncthreads();
}

// CTA argmax of (double value desc, id asc); result id returned to every thread.
__device__ __forceinline__ int cta_argmax(FilterSmem& sm, double v, int id) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  warp_argmax(v, id);
  if (lane == 0) {
    sm.redd[warp] = v;
    sm.redi[warp] = id;
  }
  __syncthreads();
  if (warp == 0) {
    double w = lane < (int)(blockDim.x >> 5) ? sm.redd[lane] : 0.0;
    int i = lane < (int)(blockDim.x >> 5) ? sm.redi[lane] : INT_MAX;
    warp_argmax(w, i);
    if (lane == 0) sm.resi = i;
  }
  __syncthreads();
  const int r = sm.resi;
  __syncthreads();
  return r;
}
__device__ __forceinline__ float cta_max(FilterSmem& sm, float v) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) sm.redf[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < (int)(blockDim.x >> 5) ? sm.redf[lane] : neg_inf();
    w = warp_max(w);
    if (lane == 0) sm.redf2[0] = w;
  }
  __syncthreads();
  const float r = sm.redf2[0];
  __syncthreads();
  return r;
}

// The filter kernel's CTA (all blockDim.x threads) as a team for team_token: its reductions are
// cta_max and cta_argmax, the token's value handed over through sm.resl.
struct FilterTeam {
  FilterSmem* sm;
};
__device__ __forceinline__ float team_max(const FilterTeam& t, float v) { return cta_max(*t.sm, v); }
__device__ __forceinline__ void team_argmax(const FilterTeam& t, double& bv, int& bt, float& bl,
                                            bool = true) {
  const int mine = bt;
  bt = cta_argmax(*t.sm, bv, bt);  // (bv is not needed after the search)
  if (bt != INT_MAX && mine == bt) t.sm->resl = bl;
  __syncthreads();
  if (bt != INT_MAX) bl = t.sm->resl;
  __syncthreads();
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_FILTER_SELECT_CUH_
