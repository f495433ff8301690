// Warp-level helpers shared by the CUDA kernels (sample, shard, stash, verify, reveal): top-2
// (multiset runner-up) and argmax merges, butterfly reductions (warp_reduce: every lane ends with
// the result; the reduction order is fixed, so sums are deterministic), the inclusive warp scan
// (warp_incl_scan: list offsets, bin prefix sums), and the fp32 Gumbel approximation
// that pre-selects the few candidates whose exact float64 score (kernels/common/rng.h) is computed.
// Framework-free; the includer provides the CUDA runtime (or tests/emu/cuda_emu.h).
#ifndef DDS_KERNELS_WARP_CUH_
#define DDS_KERNELS_WARP_CUH_

#include <stdint.h>

#include <climits>
#include <cmath>

#include "device.cuh"

namespace dds {
namespace kwarp {

struct Top2 {
  float m1;
  int i1;
  float m2;
};
__device__ __forceinline__ Top2 top2_merge(Top2 a, Top2 b) {
  Top2 r;
  if (a.m1 > b.m1) {
    r.m1 = a.m1; r.i1 = a.i1; r.m2 = fmaxf(a.m2, b.m1);
  } else if (b.m1 > a.m1) {
    r.m1 = b.m1; r.i1 = b.i1; r.m2 = fmaxf(b.m2, a.m1);
  } else {  // equal maxima (both may be -inf)
    r.m1 = a.m1;
    r.i1 = min(a.i1, b.i1);
    r.m2 = (a.i1 < INT_MAX && b.i1 < INT_MAX) ? a.m1 : fmaxf(a.m2, b.m2);
  }
  return r;
}
__device__ __forceinline__ Top2 warp_top2(Top2 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Top2 w;
    w.m1 = __shfl_xor_sync(0xffffffffu, v.m1, o);
    w.i1 = __shfl_xor_sync(0xffffffffu, v.i1, o);
    w.m2 = __shfl_xor_sync(0xffffffffu, v.m2, o);
    v = top2_merge(v, w);
  }
  return v;
}
// The butterfly reduction of v by op (every lane ends with op over the warp, in one fixed order).
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
struct AddOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
template <typename T>
__device__ __forceinline__ T warp_sum_of(T v) { return warp_reduce(v, AddOp{}); }
__device__ __forceinline__ float warp_sum(float v) { return warp_sum_of(v); }
__device__ __forceinline__ double warp_sumd(double v) { return warp_sum_of(v); }
__device__ __forceinline__ int warp_sumi(int v) { return warp_sum_of(v); }
__device__ __forceinline__ float warp_max(float v) {
  return warp_reduce(v, [](float a, float b) { return fmaxf(a, b); });
}
// argmax of (value desc, id asc); id INT_MAX = none.
__device__ __forceinline__ void argmax_merge(double& v, int& i, double v2, int i2) {
  if (i2 != INT_MAX && (i == INT_MAX || v2 > v || (v2 == v && i2 < i))) {
    v = v2;
    i = i2;
  }
}
__device__ __forceinline__ void warp_argmax(double& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    argmax_merge(v, i, v2, i2);
  }
}

// A lane's best two approximate scores (a multiset: an equal score becomes s2), for the
// pre-selection before the exact float64 scores: add(sc) returns true when sc became s1 (the
// caller then records what it belongs to).
struct Best2 {
  float s1, s2;
  __device__ __forceinline__ bool add(float sc) {
    if (sc > s1) {
      s2 = s1;
      s1 = sc;
      return true;
    }
    s2 = fmaxf(s2, sc);
    return false;
  }
};

// Inclusive prefix sum over the warp, every lane active (lane i: the sum of lanes 0..i).
template <typename T>
__device__ __forceinline__ T warp_incl_scan(T v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  return v;
}
// Float approximation of bits_to_gumbel (|error| < 5e-5 for every input), used to pre-select
// the few tokens / blocks whose exact float64 score must be computed. Both forms of E are
// computed and one selected (no branch per draw: this runs once per column of a winning block).
// Its logarithms are lg2_ftz (device.cuh): every input here is a normal float, >= 2^-53, so the
// flush never applies and the value is __logf's without its rescaling instructions.
__device__ __forceinline__ float approx_gumbel(uint64_t bits) {
  constexpr float kLn2 = 0.6931471805599453f;
  const uint64_t k = (bits >> 11) | 1ull;
  const float u = __ull2float_rn(k) * 0x1p-53f;
  const float Et = u * (1.f + u * (0.5f + u * (0.33333334f + u * 0.25f)));
  const float El = -(lg2_ftz(__ull2float_rn((1ull << 53) - k) * 0x1p-53f) * kLn2);
  const float E = u < 1e-3f ? Et : El;
  return -(lg2_ftz(E) * kLn2);
}
// Margin that keeps every token whose exact score can reach the approximate maximum.
__device__ __forceinline__ float approx_margin(float best) { return 2e-4f + 5e-7f * fabsf(best); }

}  // namespace kwarp
}  // namespace dds

#endif  // DDS_KERNELS_WARP_CUH_
