// Row access of the sample kernels: the per-request parameters (Req: find_request, load_req, after
// the rules of kernels/common/request.h), vector loads of a block of l values (the transform of
// kernels/common/row.h), the NaN-propagating maxima and warp reductions over them.
#ifndef DDS_KERNELS_SAMPLE_ROW_CUH_
#define DDS_KERNELS_SAMPLE_ROW_CUH_

#include "../common/allowed.h"
#include "../common/offsets.h"
#include "../common/request.h"
#include "../common/row.h"
#include "params.cuh"

namespace dds {
namespace ksample {

// Element access (Elt, neg_inf), the §2 transform (row::make_l, row::sanitize, row::guide,
// row::Ban) and the tempering (row::temper): kernels/common/row.h.

// Per-request parameters after docs/sampling.md §1. (Fields ordered without padding: 64 bytes,
// the size of the local-memory copy that the __noinline__ finishes take by reference.)
struct Req {
  int row_begin, row_end;
  long long ufirst;
  uint64_t seed;
  const int32_t* mask;  // the request's allowed-token mask row (null: every column allowed)
  float g;
  float invT;
  int k;
  float p;
  float minp;
  uint32_t step;
  int status;
  bool guided;
  bool greedy;
};

// The record of a block of maximum M before its sums: no runner-up or argmax yet, sums 0.
__device__ __forceinline__ BlockRec block_rec(float M) {
  BlockRec rec;
  rec.maxl = M;
  rec.second = neg_inf();
  rec.amax = INT_MAX;
  rec.sa = rec.ea = rec.sl = rec.el = 0.f;
  rec.pad = 0;
  return rec;
}

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

struct LdgLoad {
  template <typename T>
  __device__ __forceinline__ T operator()(const T* p) const { return __ldg(p); }
};

__device__ __forceinline__ Req load_req(const SampleParams& P, int r) {
  Req q;
  q.status = 0;
  q.row_begin = P.row_offsets ? __ldg(P.row_offsets + r) : r;
  q.row_end = P.row_offsets ? __ldg(P.row_offsets + r + 1) : r + 1;
  rule::Sampling s;
  rule::load_scaling(P.vals, r, &s, &q.status, LdgLoad{});
  q.greedy = s.t.greedy;
  q.invT = s.t.invT;
  q.g = s.g;
  // The row_offsets rule (common/offsets.h): a request whose offsets are not good owns no rows,
  // is flagged and never guided; the rows find_request gives it (orphans) are keyed by their
  // index in the call (row_begin = 0). A good request's rows always lie in its range.
  const bool rows_ok = !P.row_offsets ||
                       offsets::good(q.row_begin, q.row_end, r, P.num_requests, P.num_rows);
  if (!rows_ok) {
    q.status |= kReqBadRowOffsets;
    q.row_begin = q.row_end = 0;
  }
  int64_t ufirst;
  q.guided = rule::uncond_rows(P.uncond != nullptr, P.uncond_row_offsets, r, q.row_begin,
                               q.row_end - q.row_begin, P.uncond_num_rows, rows_ok, s.g, &ufirst,
                               &q.status, LdgLoad{});
  q.ufirst = ufirst;
  rule::load_filters(P.vals, r, &s, &q.status, LdgLoad{});
  q.k = s.k;
  q.p = s.p;
  q.minp = s.min_p;
  q.seed = s.seed;
  q.step = s.step;
  q.mask = allowed_row(P.allowed, P.allowed_stride, r);
  return q;
}

// Every row kernel's preamble: the request of `row` and its sanitised parameters. Device
// row_offsets that are not monotone can map a row outside its request's range: such a row is never
// guided, so no uncond row outside [0, uncond_num_rows) is ever read. MASK = false (the
// instantiation for launches without allowed-token masks): the mask is a null constant, so the
// kernel compiles without the mask's branches.
template <bool MASK = true>
__device__ __forceinline__ Req row_req(const SampleParams& P, int row) {
  Req q = load_req(P, find_request(P, row));
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (!MASK) q.mask = nullptr;
  return q;
}

// Every field is tested (bitwise, no short cut), so that each of the request's loads is consumed
// here: a load left pending (min-p on a top-p row) shares its scoreboard with the row pass's first
// data loads, and the third of the eight waited for the first two to land (sm_90 SASS).
__device__ __forceinline__ bool is_filtered(const Req& q, int V) {
  const bool k = (q.k > 0) & (q.k < V);
  return !q.greedy & (k | (q.p < 1.f) | (q.minp > 0.f));
}

// The columns of request q's rows that make_l sets to -inf (kernels/common/row.h Ban): the
// launch's banned token and the request's mask row.
__device__ __forceinline__ row::Ban ban_of(const SampleParams& P, const Req& q) {
  return row::Ban{P.banned, q.mask};
}

// The excluded columns of block `blk` (Ban), where the whole-block fast paths skipped make_l:
// the lane that holds the banned column in lv (load_block_l's layout, groups [0, N / VEC)) sets
// it to -inf (unrolled: no local memory); a masked row tests every column against its group's
// mask word (a branch uniform over the launch).
template <int DT, int N>
__device__ __forceinline__ void ban_block(const SampleParams& P, const Req& q, int blk, int lane,
                                          float (&lv)[N]) {
  constexpr int VEC = Elt<DT>::VEC;
  const row::Ban ban = ban_of(P, q);
  const int bo = ban.token - blk * kB;
  if (bo >= 0 && bo < N * 32 && ((bo / VEC) & 31) == lane) {
    const int idx = (bo / (32 * VEC)) * VEC + (bo % VEC);
#pragma unroll
    for (int e = 0; e < N; ++e)
      if (e == idx) lv[e] = neg_inf();
  }
  if (ban.mask) {
#pragma unroll
    for (int j = 0; j < N / VEC; ++j) {
      const uint32_t w = ban.word(blk * kB + j * 32 * VEC + lane * VEC, P.V);
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (((w >> e) & 1u) == 0u) lv[j * VEC + e] = neg_inf();
    }
  }
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
            const float v = row::guide(c, u, q.g);
            lv[j * VEC + e] = SAN ? row::sanitize(v) : v;
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
          lv[j * VEC + e] = SAN ? row::sanitize(c) : c;
        }
        (void)c0;
      }
    }
    ban_block<DT>(P, q, blk, lane, lv);
    return;
  }
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
    float c[VEC];
    load_vec<DT>(crow, c0, P.V, vec, c);
    const row::Ban ban = ban_of(P, q);
    const uint32_t x = ban.group(c0, P.V);
    if (q.guided) {
      float u[VEC];
      load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = row::make_l(c[e], u[e], true, q.g, x, e);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = row::make_l(c[e], 0.f, false, 0.f, x, e);
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
  return row::make_l(c, u, q.guided, q.g, col, ban_of(P, q));
}


template <int DT>
__device__ __forceinline__ int col_of(int blk, int lane, int i) {
  constexpr int VEC = Elt<DT>::VEC;
  return blk * kB + (i / VEC) * 32 * VEC + lane * VEC + (i % VEC);
}

// The maximum (M: the row's, which this block holds), its first column and the runner-up (by
// min / max, as a multiset) of a block held by a warp in load_block_l's layout.
template <int DT>
__device__ __forceinline__ Top2 block_top2_regs(const float (&lv)[32], int blk, int lane, float M) {
  float b1 = neg_inf(), b2 = neg_inf();
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    b2 = fmaxf(b2, fminf(b1, lv[e]));
    b1 = fmaxf(b1, lv[e]);
  }
  int am = INT_MAX;
  if (b1 == M) {
#pragma unroll
    for (int e = 31; e >= 0; --e)
      if (lv[e] == M) am = col_of<DT>(blk, lane, e);
  }
  return warp_top2(Top2{b1, am, b2});
}

// ------------------------------------------------------------------------------------------------
// Reductions
__device__ __forceinline__ float warp_max_nan(float v) {
  return warp_reduce(v, [](float a, float b) { return fmax_nan(a, b); });
}

// The warp's maximum over its lanes' N values of l, NaN-propagating (fmax_nan): a NaN or +inf
// anywhere (values loaded raw) sanitises lv in place (row::sanitize, docs §2) and takes the
// maximum again; unchanged values are the ones row::sanitize leaves alone. *lane_max (optional):
// this lane's maximum of the values as they are left.
template <int N>
__device__ __forceinline__ float warp_block_max(float (&lv)[N], float* lane_max = nullptr) {
  float m = lv[0];
#pragma unroll
  for (int e = 1; e < N; ++e) m = fmax_nan(m, lv[e]);
  float M = warp_max_nan(m);
  if (M != M || M == -neg_inf()) {
    m = neg_inf();
#pragma unroll
    for (int e = 0; e < N; ++e) {
      lv[e] = row::sanitize(lv[e]);
      m = fmaxf(m, lv[e]);
    }
    M = warp_max(m);
  }
  if (lane_max) *lane_max = m;
  return M;
}

__device__ __forceinline__ float fexp(float d) { return exp2f(d * 1.4426950408889634f); }

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_ROW_CUH_
