// Host emulation of the further CUDA features the kernels use (on top of cuda_emu.h):
// vector types, bit casts, __ldg / __ldcg, fences, __syncwarp, __shfl_sync, and a
// dynamic shared memory buffer (blocks run one after another, so one buffer serves them all).
#pragma once
#include "cuda_emu.h"
#include <climits>
using std::isfinite;
#define __noinline__
#define __align__(n) __attribute__((aligned(n)))
struct alignas(8) int2 { int x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
struct uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
inline long long __double2ll_rn(double x) { return (long long)std::nearbyint(x); }
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *(const volatile T*)p; }
inline int2 __ldcg(const int2* p) { return *p; }
inline uint4 __ldcg(const uint4* p) { return *p; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  g_blk->wbar[threadIdx.x / 32]->arrive_and_wait();
}
template <typename T> T __shfl_sync(unsigned mask, T v, int src) { return warp_xchg(v, src & 31, mask); }
inline unsigned __activemask() { return g_blk->conv[threadIdx.x / 32]->activemask(threadIdx.x % 32); }
inline std::atomic<int> g_stc{0};
inline int __syncthreads_count(bool p) {
  __syncthreads();
  if (p) g_stc.fetch_add(1);
  __syncthreads();
  const int r = g_stc.load();
  __syncthreads();
  if (threadIdx.x == 0) g_stc.store(0);
  __syncthreads();
  return r;
}
inline int __syncthreads_or(bool p) { return __syncthreads_count(p) != 0 ? 1 : 0; }
alignas(16) inline unsigned char g_dynsmem_buf[1 << 20];
inline unsigned char* g_dynsmem = g_dynsmem_buf;
