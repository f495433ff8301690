// Minimal host emulation of the CUDA features used by the kernels (tests/emu/run*.sh).
#pragma once
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
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
// Block-level sync and warp exchange. The threads of a block run as fibers on one host thread
// (cuda_emu_fibers.h), or, built with ThreadSanitizer, each on its own std::thread
// (cuda_emu_threads.h); both give EmuBarrier (__syncthreads, __syncwarp, the warp exchanges),
// EmuConv (the __activemask() model) and emu_run (the launch) the same semantics.
// Race checking (tests/emu/racecheck.sh builds the emulations with -fsanitize=thread). The
// barriers of __syncthreads / __syncwarp order memory among the threads that take part, as on
// the GPU, so ThreadSanitizer sees them as synchronisation. Shuffles, ballots and match_any
// exchange values but order no memory (CUDA's memory model promises that only for
// __syncwarp / __syncthreads, and racecheck reports shared-memory hazards between lanes that
// only a shuffle separates): under ThreadSanitizer their per-warp barriers are hidden from it
// (AnnotateIgnoreSync*) and their slots are relaxed atomics, so a shared-memory write and a
// read by another lane with only a shuffle between them is reported as a race.
#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreSyncBegin(const char*, int);
extern "C" void AnnotateIgnoreSyncEnd(const char*, int);
struct EmuNoSync {  // hides this thread's synchronisation from ThreadSanitizer while it lives
  EmuNoSync() { AnnotateIgnoreSyncBegin(__FILE__, __LINE__); }
  ~EmuNoSync() { AnnotateIgnoreSyncEnd(__FILE__, __LINE__); }
};
#include "cuda_emu_threads.h"  // a std::thread per CUDA thread (tests/emu/racecheck.sh)
#else
struct EmuNoSync {};
#include "cuda_emu_fibers.h"  // a block's threads as fibers on the launching thread
#endif
inline void emu_value_barrier(EmuBarrier* b) {
  EmuNoSync hide;
  b->arrive_and_wait();
}
struct EmuBlock {
  EmuBarrier* bar;
  EmuBarrier* wbar[64];
  EmuConv* conv[64];
  uint64_t slot[64][32];
};
extern EmuBlock* g_blk;
inline void __syncthreads() {
  EmuConv* c = g_blk->conv[threadIdx.x / 32];
  c->park(threadIdx.x % 32);
  g_blk->bar->arrive_and_wait();
  c->unpark(threadIdx.x % 32);
}
template <typename T> inline uint64_t to_u(T v) { uint64_t u = 0; memcpy(&u, &v, sizeof(T)); return u; }
template <typename T> inline T from_u(uint64_t u) { T v; memcpy(&v, &u, sizeof(T)); return v; }
inline void emu_slot_put(uint64_t u) {
  std::atomic_ref<uint64_t>(g_blk->slot[threadIdx.x / 32][threadIdx.x % 32])
      .store(u, std::memory_order_relaxed);
}
inline uint64_t emu_slot_get(int lane) {
  return std::atomic_ref<uint64_t>(g_blk->slot[threadIdx.x / 32][lane]).load(std::memory_order_relaxed);
}
// Every lane of `mask` publishes a value, waits for all, then fn() reads the slots; a second
// wait keeps the slots until every lane has read them. A partial mask is the one __activemask()
// returned (EmuConv).
template <typename F> auto warp_exchange(uint64_t mine, F fn, unsigned mask = 0xffffffffu) {
  EmuBarrier* b = mask == 0xffffffffu ? g_blk->wbar[threadIdx.x / 32] : &g_blk->conv[threadIdx.x / 32]->sub;
  emu_slot_put(mine);
  emu_value_barrier(b);
  auto r = fn();
  emu_value_barrier(b);
  return r;
}
template <typename T> T warp_xchg(T v, int src, unsigned mask = 0xffffffffu) {
  return warp_exchange(to_u(v), [&] { return from_u<T>(emu_slot_get(src)); }, mask);
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) { return warp_xchg(v, (threadIdx.x % 32) ^ o); }
template <typename T> T __shfl_up_sync(unsigned, T v, int o) {
  int l = threadIdx.x % 32; return warp_xchg(v, l >= o ? l - o : l); }
inline unsigned __match_any_sync(unsigned, int v) {
  return warp_exchange((uint64_t)(uint32_t)v, [&] {
    unsigned m = 0;
    for (int l = 0; l < 32; ++l) if (emu_slot_get(l) == (uint64_t)(uint32_t)v) m |= 1u << l;
    return m;
  });
}
// CUDA's atomicAdd / atomicOr are relaxed: they order no other memory (ThreadSanitizer must not
// take a shared counter for synchronisation).
template <typename T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v, std::memory_order_relaxed); }
inline int atomicOr(int* p, int v) { return std::atomic_ref<int>(*p).fetch_or(v, std::memory_order_relaxed); }
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
inline unsigned __ballot_sync(unsigned mask, bool p) {
  return warp_exchange(p ? 1u : 0u, [&] {
    unsigned m = 0;
    for (int l = 0; l < 32; ++l)
      if ((mask >> l & 1u) && emu_slot_get(l)) m |= 1u << l;
    return m;
  }, mask);
}
// Runs kernel f over grid x block threads, blocks one after another (so that one buffer serves
// as every block's dynamic shared memory, and a kernel's static __shared__ variables are one
// set). Each block gets fresh barriers; a thread that returns from f drops out of its block's
// and parks at its warp's __activemask() model. emu_run (cuda_emu_fibers.h, or under
// ThreadSanitizer cuda_emu_threads.h) runs the threads.
inline void emu_launch(unsigned grid, unsigned block, const std::function<void()>& f) {
  gridDim.x = grid; blockDim.x = block;
  if (grid == 0 || block == 0) return;
  if (block > 1024) {
    fprintf(stderr, "emulation: a block of %u threads (CUDA allows 1024)\n", block);
    abort();
  }
  const unsigned nw = (block + 31) / 32;
  EmuBlock blk;
  g_blk = &blk;
  auto setup = [&] {
    blk.bar = new EmuBarrier((int)block);
    for (unsigned w = 0; w < nw; ++w) {
      blk.wbar[w] = new EmuBarrier(32);
      blk.conv[w] = new EmuConv;
    }
  };
  auto teardown = [&] {
    delete blk.bar;
    for (unsigned w = 0; w < nw; ++w) {
      delete blk.wbar[w];
      delete blk.conv[w];
    }
  };
  auto done = [&](unsigned t) {
    blk.conv[t / 32]->park(t % 32);  // done: never at an __activemask() of this block again
    blk.bar->arrive_and_drop();
    blk.wbar[t / 32]->arrive_and_drop();
  };
  emu_run(grid, block, f, setup, teardown, done);
}
#define EMU_LAUNCH(k, g, b, P) (emu_launch((unsigned)(g), (unsigned)(b), [&] { k(P); }), 0)
