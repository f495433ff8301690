// The std::thread form of the emulation (cuda_emu.h includes it under ThreadSanitizer, for
// tests/emu/racecheck.sh): a std::thread per CUDA thread, so that ThreadSanitizer sees the real
// interleavings and the happens-before edges of the barriers. EmuBarrier, EmuConv and emu_run
// have the same interface and semantics as the fiber form (cuda_emu_fibers.h).
#pragma once
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <linux/futex.h>
#include <mutex>
#include <sched.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>
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
// Runs f over grid x block threads, blocks one after another. The block's threads are made once
// per launch and run every block in turn (making threads per block cost most of the run time,
// ThreadSanitizer's above all): between two blocks they and the launching thread meet at a
// barrier (which also orders one block's writes before the next block, as the joins did).
// setup() / teardown() run on the launching thread before / after each block; done(t) on thread
// t when it returns from f.
template <typename Setup, typename Teardown, typename Done>
void emu_run(unsigned grid, unsigned block, const std::function<void()>& f, Setup setup,
             Teardown teardown, Done done) {
  EmuBarrier pool((int)block + 1);  // the block's threads + this one
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < block; ++t)
    ts.emplace_back([&, t] {
      threadIdx.x = t;
      for (unsigned b = 0; b < grid; ++b) {
        pool.arrive_and_wait();  // block b set up
        blockIdx.x = b;
        f();
        done(t);
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
