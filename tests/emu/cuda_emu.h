// Minimal host emulation of the CUDA features used by the kernels (tests/emu/run*.sh).
#pragma once
#include <atomic>
#include <climits>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <chrono>
#include <condition_variable>
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
// Block-level sync and warp exchange.
// The emulation's barrier (__syncthreads, __syncwarp, the warp exchanges, between blocks):
// atomics only, so that with its synchronisation hidden (emu_value_barrier, under
// ThreadSanitizer) it leaves no plain data for ThreadSanitizer to report (std::barrier's tree has
// some; this one is also faster here). One word holds the participants (high half) and the
// arrivals (low half), so that of an arrival and a drop racing, exactly the one that makes them
// equal completes the phase; the completer clears the arrivals, then bumps the phase the others
// wait on. Waiting is a raw futex, not std::atomic::wait: libstdc++'s waiter pool is shared by
// unrelated atomics (its counters would give ThreadSanitizer orderings between threads of
// different barriers, and hide races at random).
struct EmuBarrier {
  std::atomic<uint64_t> st;
  std::atomic<unsigned> phase{0};
  explicit EmuBarrier(int n) : st((uint64_t)n << 32) {}
  void reset(int n) { st.store((uint64_t)n << 32, std::memory_order_relaxed); }  // (while unused)
  static bool full(uint64_t v) { return (v >> 32) != 0 && (v >> 32) == (v & 0xffffffffu); }
  void complete() {
    st.fetch_and(~(uint64_t)0xffffffffu, std::memory_order_acq_rel);
    phase.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<unsigned*>(&phase), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
  }
  void arrive_and_wait() {
    const unsigned ph = phase.load(std::memory_order_acquire);
    if (full(st.fetch_add(1, std::memory_order_acq_rel) + 1)) {
      complete();
      return;
    }
    // a short spin and a few yields first (as std::atomic::wait does), then sleep
    for (int i = 0; i < 16; ++i) {
      if (phase.load(std::memory_order_acquire) != ph) return;
      __builtin_ia32_pause();
    }
    for (int i = 0; i < 12; ++i) {
      if (phase.load(std::memory_order_acquire) != ph) return;
      sched_yield();
    }
    while (phase.load(std::memory_order_acquire) == ph)
      syscall(SYS_futex, reinterpret_cast<unsigned*>(&phase), FUTEX_WAIT_PRIVATE, ph, nullptr,
              nullptr, 0);
  }
  void arrive_and_drop() {
    if (full(st.fetch_sub((uint64_t)1 << 32, std::memory_order_acq_rel) - ((uint64_t)1 << 32))) complete();
  }
};
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
#else
struct EmuNoSync {};
#endif
inline void emu_value_barrier(EmuBarrier* b) {
  EmuNoSync hide;
  b->arrive_and_wait();
}
// Convergence, for __activemask() in divergent code (filter_kernel's in-CTA candidate list: a
// loop whose trip count differs between lanes, a ballot and a shuffle over __activemask()). A lane
// at __activemask() waits until every lane of its warp is there too or parked (waiting at
// __syncthreads, or done with the block); the lanes there are the mask (the largest set the
// hardware could report), and the warp operations they then call with that mask meet in `sub`.
// Hidden from ThreadSanitizer like the shuffles (EmuNoSync): it orders no memory on the GPU.
struct EmuConv {
  std::mutex m;
  std::condition_variable cv;
  std::atomic<uint32_t> parked{0}, arrived{0}, result{0};
  std::atomic<unsigned> gen{0};
  EmuBarrier sub{32};
  void try_form() {  // with m held
    const uint32_t a = arrived.load(), p = parked.load();
    if (a == 0 || (a | p) != 0xffffffffu) return;
    result.store(a);
    sub.reset(__builtin_popcount(a));
    arrived.store(0);
    gen.fetch_add(1);
    cv.notify_all();
  }
  // park / unpark: lock-free unless a lane waits at __activemask() (seq_cst: of a parking lane
  // and an arriving one, at least one sees the other and forms the mask).
  void park(unsigned lane) {
    EmuNoSync hide;
    parked.fetch_or(1u << lane);
    if (arrived.load() != 0) {
      std::lock_guard<std::mutex> lk(m);
      try_form();
    }
  }
  void unpark(unsigned lane) {
    EmuNoSync hide;
    parked.fetch_and(~(1u << lane));
  }
  unsigned activemask(unsigned lane) {
    EmuNoSync hide;
    std::unique_lock<std::mutex> lk(m);
    const unsigned g = gen.load();
    arrived.fetch_or(1u << lane);
    try_form();
    if (!cv.wait_for(lk, std::chrono::seconds(120), [&] { return gen.load() != g; })) {
      fprintf(stderr, "emulation: __activemask() waited 120 s for lanes %08x of its warp (a "
                      "full-warp operation in divergent code?)\n", ~(arrived.load() | parked.load()));
      abort();
    }
    return result.load();
  }
};
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
// Runs kernel f over grid x block threads, blocks one after another. The block's threads are
// made once per launch and run every block in turn (making threads per block cost most of the
// run time, ThreadSanitizer's above all): between two blocks they and the launching thread meet
// at a barrier (which also orders one block's writes before the next block, as the joins did),
// and each block gets fresh barriers (a thread that returns from f drops out of its block's).
inline void emu_launch(unsigned grid, unsigned block, const std::function<void()>& f) {
  gridDim.x = grid; blockDim.x = block;
  if (grid == 0 || block == 0) return;
  const unsigned nw = (block + 31) / 32;
  EmuBlock blk;
  g_blk = &blk;
  EmuBarrier pool((int)block + 1);  // the block's threads + this one
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
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < block; ++t)
    ts.emplace_back([&, t] {
      threadIdx.x = t;
      for (unsigned b = 0; b < grid; ++b) {
        pool.arrive_and_wait();  // block b set up
        blockIdx.x = b;
        f();
        blk.conv[t / 32]->park(t % 32);  // done: never at an __activemask() of this block again
        blk.bar->arrive_and_drop();
        blk.wbar[t / 32]->arrive_and_drop();
        pool.arrive_and_wait();  // every thread done with block b
      }
    });
  for (unsigned b = 0; b < grid; ++b) {
    setup();
    pool.arrive_and_wait();
    pool.arrive_and_wait();
    teardown();
  }
  for (auto& t : ts) t.join();
}
#define EMU_LAUNCH(k, g, b, P) (emu_launch((unsigned)(g), (unsigned)(b), [&] { k(P); }), 0)
