// Minimal host emulation of the CUDA features used by the kernels (tests/emu/run*.sh).
#pragma once
#include <atomic>
#include <barrier>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#include <algorithm>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
typedef int cudaError_t;
typedef void* cudaStream_t;
constexpr int cudaSuccess = 0;
inline cudaError_t cudaGetLastError() { return 0; }
struct dim3e { unsigned x = 0, y = 0, z = 0; };
extern thread_local dim3e threadIdx, blockIdx;
extern dim3e blockDim, gridDim;
using std::min; using std::max;
using std::isnan; using std::isinf; using std::exp; using std::log; using std::ldexp;
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline long long __double_as_longlong(double d) { long long u; memcpy(&u, &d, 8); return u; }
inline double __longlong_as_double(long long u) { double d; memcpy(&d, &u, 8); return d; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs(x); }
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  s &= 31;
  return s ? (hi << s) | (lo >> (32 - s)) : hi;
}
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
// Block-level sync and warp exchange.
struct EmuBlock {
  std::barrier<>* bar;
  std::barrier<>* wbar[64];
  uint64_t slot[64][32];
};
extern EmuBlock* g_blk;
inline void __syncthreads() { g_blk->bar->arrive_and_wait(); }
template <typename T> inline uint64_t to_u(T v) { uint64_t u = 0; memcpy(&u, &v, sizeof(T)); return u; }
template <typename T> inline T from_u(uint64_t u) { T v; memcpy(&v, &u, sizeof(T)); return v; }
template <typename T> T warp_xchg(T v, int src) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  g_blk->slot[w][l] = to_u(v);
  g_blk->wbar[w]->arrive_and_wait();
  T r = from_u<T>(g_blk->slot[w][src]);
  g_blk->wbar[w]->arrive_and_wait();
  return r;
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) { return warp_xchg(v, (threadIdx.x % 32) ^ o); }
template <typename T> T __shfl_up_sync(unsigned, T v, int o) {
  int l = threadIdx.x % 32; return warp_xchg(v, l >= o ? l - o : l); }
inline unsigned __match_any_sync(unsigned, int v) {
  const int w = threadIdx.x / 32;
  g_blk->slot[w][threadIdx.x % 32] = (uint64_t)(uint32_t)v;
  g_blk->wbar[w]->arrive_and_wait();
  unsigned m = 0;
  for (int l = 0; l < 32; ++l) if (g_blk->slot[w][l] == (uint64_t)(uint32_t)v) m |= 1u << l;
  g_blk->wbar[w]->arrive_and_wait();
  return m;
}
template <typename T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
inline int atomicOr(int* p, int v) { return std::atomic_ref<int>(*p).fetch_or(v); }
// Vector type, bit casts, rounding-mode intrinsics, ballot (kernels/sample.cuh, src/cuda_shard.cu).
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __logf(float x) { return logf(x); }
inline float __ull2float_rn(unsigned long long x) { return (float)x; }
inline unsigned long long __double2ull_rn(double x) { return (unsigned long long)std::nearbyint(x); }
inline unsigned __ballot_sync(unsigned, bool p) {
  const int w = threadIdx.x / 32;
  g_blk->slot[w][threadIdx.x % 32] = p ? 1u : 0u;
  g_blk->wbar[w]->arrive_and_wait();
  unsigned m = 0;
  for (int l = 0; l < 32; ++l)
    if (g_blk->slot[w][l]) m |= 1u << l;
  g_blk->wbar[w]->arrive_and_wait();
  return m;
}
// Runs kernel f over grid x block threads (blocks sequentially).
inline void emu_launch(unsigned grid, unsigned block, const std::function<void()>& f) {
  gridDim.x = grid; blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) {
    EmuBlock blk;
    std::barrier<> bar(block);
    std::vector<std::barrier<>*> wb;
    for (unsigned w = 0; w < block / 32; ++w) blk.wbar[w] = new std::barrier<>(32);
    blk.bar = &bar;
    g_blk = &blk;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t)
      ts.emplace_back([&, t] {
        threadIdx.x = t; blockIdx.x = b;
        f();
        bar.arrive_and_drop();
        blk.wbar[t / 32]->arrive_and_drop();
      });
    for (auto& t : ts) t.join();
    for (unsigned w = 0; w < block / 32; ++w) delete blk.wbar[w];
  }
}
#define EMU_LAUNCH(k, g, b, P) (emu_launch((unsigned)(g), (unsigned)(b), [&] { k(P); }), 0)
