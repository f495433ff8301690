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

// Programmatic dependent launch (sm_90): pdl_trigger lets the grid queued after this one with
// the launch attribute (launch_kernel's `overlap`) start once every CTA of this grid has called it
// or exited; pdl_wait waits until the grid this one was so launched after has completed and its
// writes are visible. A grid launched that way learns what its predecessor wrote through the
// counters of overlap_signal / overlap_wait below, and one of its CTAs calls pdl_wait before it
// exits, so that its completion still implies the predecessor's (the next launch of the stream
// waits only for this grid). No-ops before sm_90 and in the host emulation (grids run in order).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// One of n CTAs that count on *done is done (every thread of the CTA calls it): a barrier, then
// thread 0 publishes the CTA's writes (a fence, then one count on *done). True in every thread of
// the CTA whose count was the n-th, which then sees what every counted CTA wrote before its count
// (a fence after it). The split kernels' per-row counters, filter_kernel's fallback list and the
// overlap's grid counters (overlap_signal) count this way.
__device__ __forceinline__ bool cta_count_done(unsigned* done, unsigned n) {
  __syncthreads();
  unsigned old = 0;
  if (threadIdx.x == 0) {
    __threadfence();
    old = atomicAdd(done, 1u);
  }
  const bool last = __syncthreads_or(threadIdx.x == 0 && old == n - 1u) != 0;
  if (last) __threadfence();
  return last;
}
// The same for n warps that count on *done (every lane of the warp calls it): a __syncwarp, then
// lane 0 publishes the warp's writes and counts; true in every lane of the n-th warp, which then
// sees what every counted warp wrote. The fused plain pass's rows and the stash's partials.
__device__ __forceinline__ bool warp_count_done(int* done, int n) {
  __syncwarp();
  int old = 0;
  if ((threadIdx.x & 31) == 0) {
    __threadfence();
    old = atomicAdd(done, 1);
  }
  const bool last = __shfl_sync(0xffffffffu, old, 0) == n - 1;
  if (last) __threadfence();
  return last;
}
// The CTA has written what a grid launched after it needs: cta_count_done on the grid's counter,
// then pdl_trigger. True in every thread of the CTA whose count was the n-th.
__device__ __forceinline__ bool overlap_signal(unsigned* done, unsigned n) {
  const bool last = cta_count_done(done, n);
  pdl_trigger();
  return last;
}
// Waits (every thread) until *done reaches n, then reads what the counted CTAs wrote before
// their counts (a fence after the count, as after the split kernels' per-row counters).
__device__ __forceinline__ void overlap_wait(const unsigned* done, unsigned n) {
#if defined(__CUDA_ARCH__)
  if (threadIdx.x == 0)
    while (*reinterpret_cast<const volatile unsigned*>(done) < n) __nanosleep(64);
#else
  if (threadIdx.x == 0 && *done != n) __builtin_trap();  // grids run in order: all counted, once
#endif
  __syncthreads();
  __threadfence();
}

}  // namespace dds

// `extern __shared__ unsigned char name[]`, 16-byte aligned: a kernel's dynamic shared memory.
#ifndef DDS_DYNAMIC_SMEM
#define DDS_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

#endif  // DDS_KERNELS_COMMON_DEVICE_CUH_
