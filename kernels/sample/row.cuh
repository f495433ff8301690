// Row access: element types (Elt), the per-request parameters (Req: find_request, load_req), the
// guidance / ban / temperature transform (make_l, xform), vector loads of a block of l values,
// the NaN-propagating maxima and warp reductions over them.
#ifndef DDS_KERNELS_SAMPLE_ROW_CUH_
#define DDS_KERNELS_SAMPLE_ROW_CUH_

#include "../common/offsets.h"
#include "params.cuh"

namespace dds {
namespace ksample {

// ------------------------------------------------------------------------------------------------
// Element access
template <int DT>
struct Elt;
template <>
struct Elt<0> {
  using T = float;
  static constexpr int VEC = 4;
  static __device__ __forceinline__ float cvt(float x) { return x; }
};
template <>
struct Elt<1> {
  using T = uint16_t;
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float cvt(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
};
template <>
struct Elt<2> {
  using T = uint16_t;
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float cvt(uint16_t h) { return __half2float(__ushort_as_half(h)); }
};

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Per-request parameters after docs/sampling.md §1.
struct Req {
  int row_begin, row_end;
  bool guided;
  long long ufirst;
  float g;
  bool greedy;
  float invT;
  int k;
  float p;
  float minp;
  uint64_t seed;
  uint32_t step;
  int status;
};

__device__ __forceinline__ int find_request(const SampleParams& P, int row) {
  if (!P.row_offsets) return row;
  int lo = 0, hi = P.num_requests;  // last r in [0, n) with offs[r] <= row
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (__ldg(P.row_offsets + mid) <= row) lo = mid;
    else hi = mid;
  }
  return lo;
}

__device__ __forceinline__ Req load_req(const SampleParams& P, int r) {
  Req q;
  q.status = 0;
  q.row_begin = P.row_offsets ? __ldg(P.row_offsets + r) : r;
  q.row_end = P.row_offsets ? __ldg(P.row_offsets + r + 1) : r + 1;
  float T = P.temps ? __ldg(P.temps + r) : P.temp;
  if (isnan(T) || T < 0.f || isinf(T)) {
    T = 1.f;
    q.status |= kReqBadTemperature;
  }
  q.greedy = false;
  q.invT = 1.f;
  if (T == 0.f) {
    q.greedy = true;
  } else {
    q.invT = __fdiv_rn(1.0f, T);
    if (isinf(q.invT)) q.greedy = true;
  }
  float g = P.gs ? __ldg(P.gs + r) : P.g;
  if (!isfinite(g)) {
    g = 0.f;
    q.status |= kReqBadGuidance;
  }
  q.g = g;
  q.guided = false;
  q.ufirst = 0;
  // The row_offsets rule (common/offsets.h): a request whose offsets are not good owns no rows,
  // is flagged and never guided; the rows find_request gives it (orphans) are keyed by their
  // index in the call (row_begin = 0). A good request's rows always lie in its range.
  const bool rows_ok = !P.row_offsets ||
                       offsets::good(q.row_begin, q.row_end, r, P.num_requests, P.num_rows);
  if (!rows_ok) {
    q.status |= kReqBadRowOffsets;
    q.row_begin = q.row_end = 0;
  }
  if (P.uncond != nullptr && g != 0.f) {
    long long first = P.uncond_row_offsets ? (long long)__ldg(P.uncond_row_offsets + r)
                                           : (long long)q.row_begin;
    if (P.uncond_row_offsets == nullptr || first >= 0) {
      if (!rows_ok || first < 0 || first + (q.row_end - q.row_begin) > P.uncond_num_rows) {
        q.status |= kReqBadUncondRows;
      } else {
        q.guided = true;
        q.ufirst = first;
      }
    }
  }
  int k = P.ks ? __ldg(P.ks + r) : P.k;
  if (k < 0) {
    k = 0;
    q.status |= kReqBadTopK;
  }
  q.k = k;
  float p = P.ps ? __ldg(P.ps + r) : P.p;
  if (isnan(p)) {
    p = 1.f;
    q.status |= kReqBadTopP;
  }
  q.p = p;
  float mp = P.minps ? __ldg(P.minps + r) : P.minp;
  if (isnan(mp) || mp < 0.f) {
    mp = 0.f;
    q.status |= kReqBadMinP;
  }
  if (mp > 1.f) mp = 1.f;
  q.minp = mp;
  q.seed = P.seeds ? __ldg(P.seeds + r) : P.seed;
  q.step = P.steps ? __ldg(P.steps + r) : P.step;
  return q;
}

// Every row kernel's preamble: the request of `row` and its sanitised parameters.
__device__ __forceinline__ Req row_req(const SampleParams& P, int row) {
  return load_req(P, find_request(P, row));
}

__device__ __forceinline__ bool is_filtered(const Req& q, int V) {
  return !q.greedy && ((q.k > 0 && q.k < V) || q.p < 1.f || q.minp > 0.f);
}

// §2: l from c (and u).
__device__ __forceinline__ float make_l(float c, float u, bool guided, float g, int t, int banned) {
  float v = c;
  if (guided) v = (c == neg_inf() || u == neg_inf()) ? neg_inf() : __fmaf_rn(g, __fsub_rn(c, u), c);
  if (t == banned) v = neg_inf();
  if (isnan(v)) v = neg_inf();
  if (v == -neg_inf()) v = FLT_MAX;
  return v;
}
// §2 step 3: a = l * invT, +inf -> FLT_MAX.
// A finite l whose product overflows to -inf stays in K0 as -FLT_MAX (docs §2 step 3).
__device__ __forceinline__ float xform(float l, float invT) {
  float a = fminf(__fmul_rn(l, invT), FLT_MAX);
  if (a == neg_inf() && l != neg_inf()) a = -FLT_MAX;
  return a;
}

// §2 without the banned-token rule (the row pass patches that one column separately):
// NaN -> -inf, +inf -> FLT_MAX in three instructions.
__device__ __forceinline__ float sanitize_fast(float v) {
  return (v == v) ? fminf(v, FLT_MAX) : neg_inf();
}
__device__ __forceinline__ float make_l_nb(float c, float u, bool guided, float g) {
  float v = c;
  if (guided) v = (c == neg_inf() || u == neg_inf()) ? neg_inf() : __fmaf_rn(g, __fsub_rn(c, u), c);
  return sanitize_fast(v);
}
// max that propagates NaN (sm_80+): the row pass's fast path detects NaN and +inf through it.
__device__ __forceinline__ float fmax_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  return (a != a || b != b) ? __int_as_float(0x7fffffff) : fmaxf(a, b);
#endif
}
// Pairwise max of two packed bf16x2 (DT 1) / f16x2 (DT 2) words, NaN-propagating (sm_80+).
template <int DT>
__device__ __forceinline__ uint32_t pmax_nan(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t d;
  if (DT == 1) asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const float a0 = Elt<DT>::cvt((uint16_t)(a & 0xffffu)), b0 = Elt<DT>::cvt((uint16_t)(b & 0xffffu));
  const float a1 = Elt<DT>::cvt((uint16_t)(a >> 16)), b1 = Elt<DT>::cvt((uint16_t)(b >> 16));
  const uint32_t lo = (a0 != a0 || b0 != b0 || a0 >= b0) ? (a & 0xffffu) : (b & 0xffffu);
  const uint32_t hi = (a1 != a1 || b1 != b1 || a1 >= b1) ? (a >> 16) : (b >> 16);
  return lo | (hi << 16);
#endif
}

// Loads the VEC values of columns [c0, c0 + VEC) of a row; columns >= V read as -inf.
template <int DT>
__device__ __forceinline__ void load_vec(const typename Elt<DT>::T* rowp, int c0, int V, bool vec,
                                         float* out) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  if (vec && c0 + VEC <= V) {
    const uint4 raw = *reinterpret_cast<const uint4*>(rowp + c0);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int q = 0; q < VEC; ++q) out[q] = Elt<DT>::cvt(e[q]);
  } else {
#pragma unroll
    for (int q = 0; q < VEC; ++q) out[q] = (c0 + q < V) ? Elt<DT>::cvt(rowp[c0 + q]) : neg_inf();
  }
}

// The 1024 l values of block `blk` of `row` for one warp: lane holds columns
// blk*1024 + j*32*VEC + lane*VEC + q at lv[j*VEC + q].
// SAN = false (the row pass's fast path): whole 16-byte-aligned blocks skip the NaN -> -inf and
// +inf -> FLT_MAX rule; the caller detects both through a NaN-propagating maximum and reloads.
template <int DT, bool SAN = true>
__device__ __forceinline__ void load_block_l(const SampleParams& P, const Req& q, int row, int blk,
                                             int lane, float (&lv)[32]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const T* urow = nullptr;
  if (q.guided)
    urow = reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride;
  const bool vec = P.vec_ok != 0;
  if (vec && (blk + 1) * kB <= P.V) {
    // Whole block inside the row, 16-byte aligned: issue every load before any use.
    uint4 cr[NJ];
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      cr[j] = *reinterpret_cast<const uint4*>(crow + blk * kB + j * 32 * VEC + lane * VEC);
    if (q.guided) {
      // u in groups of at most 4 loads (16 registers), combined into l as they arrive, so that a
      // float block (8 + 8 loads) does not hold both tensors in registers at once.
      constexpr int UG = NJ < 4 ? NJ : 4;
#pragma unroll
      for (int j0 = 0; j0 < NJ; j0 += UG) {
        uint4 ur[UG];
#pragma unroll
        for (int jj = 0; jj < UG; ++jj)
          ur[jj] = *reinterpret_cast<const uint4*>(urow + blk * kB + (j0 + jj) * 32 * VEC + lane * VEC);
#pragma unroll
        for (int jj = 0; jj < UG; ++jj) {
          const int j = j0 + jj;
          const T* ce = reinterpret_cast<const T*>(&cr[j]);
          const T* ue = reinterpret_cast<const T*>(&ur[jj]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float c = Elt<DT>::cvt(ce[e]), u = Elt<DT>::cvt(ue[e]);
            lv[j * VEC + e] = SAN ? make_l_nb(c, u, true, q.g)
                                  : ((c == neg_inf() || u == neg_inf()) ? neg_inf()
                                                                        : __fmaf_rn(q.g, __fsub_rn(c, u), c));
          }
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const T* ce = reinterpret_cast<const T*>(&cr[j]);
        const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float c = Elt<DT>::cvt(ce[e]);
          lv[j * VEC + e] = SAN ? sanitize_fast(c) : c;
        }
        (void)c0;
      }
    }
    // The banned column, if it lies in this block: one lane patches it (unrolled, no local memory).
    const int bo = P.banned - blk * kB;
    if (bo >= 0 && bo < kB && ((bo / VEC) & 31) == lane) {
      const int idx = (bo / (32 * VEC)) * VEC + (bo % VEC);
#pragma unroll
      for (int e = 0; e < 32; ++e)
        if (e == idx) lv[e] = neg_inf();
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
    float c[VEC];
    load_vec<DT>(crow, c0, P.V, vec, c);
    if (q.guided) {
      float u[VEC];
      load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = make_l(c[e], u[e], true, q.g, c0 + e, P.banned);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = make_l(c[e], 0.f, false, 0.f, c0 + e, P.banned);
    }
  }
}

// One column's l (scalar load), for re-reads of a few columns.
template <int DT>
__device__ __forceinline__ float load_l(const SampleParams& P, const Req& q, int row, int col) {
  using T = typename Elt<DT>::T;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const float c = Elt<DT>::cvt(crow[col]);
  float u = 0.f;
  if (q.guided)
    u = Elt<DT>::cvt(reinterpret_cast<const T*>(P.uncond)[(q.ufirst + (row - q.row_begin)) * P.uncond_stride + col]);
  return make_l(c, u, q.guided, q.g, col, P.banned);
}


template <int DT>
__device__ __forceinline__ int col_of(int blk, int lane, int i) {
  constexpr int VEC = Elt<DT>::VEC;
  return blk * kB + (i / VEC) * 32 * VEC + lane * VEC + (i % VEC);
}

// ------------------------------------------------------------------------------------------------
// Reductions
__device__ __forceinline__ float warp_max_nan(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float fexp(float d) { return exp2f(d * 1.4426950408889634f); }

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_ROW_CUH_
