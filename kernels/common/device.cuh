// The device-only instructions the kernels use, each behind one name (and exp_terms, the one
// exponential sum built on ex2), with the form the host emulation compiles (tests/emu builds the kernel headers with g++: __CUDA_ARCH__ undefined), and
// the declaration of a kernel's dynamic shared memory (DDS_DYNAMIC_SMEM, which the emulation
// defines before including the kernels). Nothing else in the kernels needs to know about the
// emulation.
#ifndef DDS_KERNELS_COMMON_DEVICE_CUH_
#define DDS_KERNELS_COMMON_DEVICE_CUH_

#include <cmath>

namespace dds {

// 2^x (MUFU.EX2, flushes results below 2^-126 to 0).
__device__ __forceinline__ float ex2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// log2(x) (MUFU.LG2, denormal inputs flushed to 0).
__device__ __forceinline__ float lg2_ftz(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return log2f(x);
#endif
}

// A lane's exponential sums over its N values x(e) relative to m: s += 2^d and en += 2^d d with
// d = max((x - m) log2 e, -1000) (the entropy term in base 2; the caller scales by ln 2). Every
// block record's sums (kernels/sample, kernels/shard) take this one arithmetic.
template <int N, class X>
__device__ __forceinline__ void exp_terms(const X& x, float m, float& s, float& en) {
  constexpr float kLog2e = 1.4426950408889634f;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float d = fmaxf((x(e) - m) * kLog2e, -1000.f);
    const float v = ex2(d);
    s += v;
    en = fmaf(v, d, en);
  }
}

}  // namespace dds

// `extern __shared__ unsigned char name[]`, 16-byte aligned: a kernel's dynamic shared memory.
#ifndef DDS_DYNAMIC_SMEM
#define DDS_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

#endif  // DDS_KERNELS_COMMON_DEVICE_CUH_
