// The fiber form of the emulation (cuda_emu.h includes it unless built with ThreadSanitizer): a
// block's CUDA threads are fibers on the launching thread, switched cooperatively. A fiber runs
// until it waits (a barrier of __syncthreads / __syncwarp / a warp exchange, or __activemask()),
// then the scheduler resumes the next runnable fiber; a barrier's completion makes its waiters
// runnable again. Without an OS thread per CUDA thread there is no kernel scheduling, no futex
// and no signal mask work per wait, so the run time is the kernels' own work plus a few
// nanoseconds per switch, and a second busy process on the machine slows it no more than any
// single-threaded program.
//
// Order: fibers resume in FIFO order of becoming runnable (deterministic), or, with the
// environment variable EMU_FIBER_SEED set to a nonzero number, in a pseudo-random order drawn
// from that seed, to look for kernel bugs that only some interleavings show. A fiber switches
// only where it waits, so a race between two plain accesses with no barrier between them shows
// only under ThreadSanitizer (tests/emu/racecheck.sh, which runs cuda_emu_threads.h).
//
// Context switch: a few lines of x86-64 assembly (emu_fiber_switch) save the callee-saved
// registers and the stack pointer of one fiber and restore another's; no signal mask and no FPU
// control state is switched (no kernel changes the rounding mode), so a switch makes no system
// call. Stacks: one mapping of 1024 stacks of 256 KiB (committed lazily, on first touch), each
// with a guard page below it; a fiber that overflows its stack stops the run with a message.
// EmuBarrier, EmuConv and emu_run have the interface and semantics of cuda_emu_threads.h.
#pragma once
#if !defined(__x86_64__)
#error "tests/emu/cuda_emu_fibers.h: the fiber switch is written for x86-64"
#endif
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

// emu_fiber_switch(&save_sp, next_sp): pushes the callee-saved registers, stores the stack
// pointer in *save_sp, loads next_sp, pops the registers saved there and returns into that
// context. A fresh fiber's stack is laid out as if it had called emu_fiber_switch (emu_run).
extern "C" void emu_fiber_switch(void** save_sp, void* next_sp);
asm(R"(
  .text
  .weak emu_fiber_switch
  .hidden emu_fiber_switch
  .type emu_fiber_switch, @function
emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_fiber_switch, .-emu_fiber_switch
)");

struct EmuFiber {
  void* sp = nullptr;
  EmuFiber* next = nullptr;  // in a wait list
  unsigned tid = 0;
  bool waiting = false, done = false;
};
// The scheduler of the running launch (blocks run one after another on one host thread).
struct EmuSched {
  static constexpr size_t kStack = 256 << 10, kGuard = 4096, kMaxFibers = 1024;
  char* stacks = nullptr;  // kMaxFibers x (guard page + stack)
  void* main_sp = nullptr;  // the scheduler's context while a fiber runs
  EmuFiber* cur = nullptr;
  std::vector<EmuFiber> fibers;
  std::vector<EmuFiber*> runq;  // a ring of capacity fibers.size(): each fiber is in it at most once
  size_t head = 0, count = 0;
  unsigned ndone = 0;
  uint64_t rng = 0;  // 0: FIFO order; else the state of the random order (EMU_FIBER_SEED)
  const std::function<void(unsigned)>* body = nullptr;
  void push(EmuFiber* f) { runq[(head + count++) % runq.size()] = f; }
  EmuFiber* pop() {
    if (rng != 0) {  // xorshift64*: a random runnable fiber goes first
      rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
      const size_t i = (head + (size_t)((rng * 0x2545F4914F6CDD1Dull) >> 33) % count) % runq.size();
      std::swap(runq[i], runq[head]);
    }
    EmuFiber* f = runq[head];
    head = (head + 1) % runq.size();
    --count;
    return f;
  }
};
inline EmuSched g_emu_sched;

// Fibers waiting for one event (a barrier phase, a convergence mask).
struct EmuWaitList {
  EmuFiber* head = nullptr;
  EmuFiber** tail = &head;
  // The running fiber waits here until wake_all(); the scheduler runs the others meanwhile.
  void wait() {
    EmuSched& s = g_emu_sched;
    EmuFiber* f = s.cur;
    f->next = nullptr;
    f->waiting = true;
    *tail = f;
    tail = &f->next;
    emu_fiber_switch(&f->sp, s.main_sp);
  }
  void wake_all() {
    for (EmuFiber* f = head; f != nullptr;) {
      EmuFiber* n = f->next;
      f->waiting = false;
      g_emu_sched.push(f);
      f = n;
    }
    head = nullptr;
    tail = &head;
  }
};

// Block-wide and warp-wide barrier: n participants (a thread done with the block drops out);
// the arrival that makes the arrivals equal to the participants completes the phase.
struct EmuBarrier {
  int n, arrived = 0;
  unsigned phase = 0;
  EmuWaitList waiters;
  explicit EmuBarrier(int n_) : n(n_) {}
  void reset(int n_) { n = n_; }  // (while unused)
  void complete() {
    arrived = 0;
    ++phase;
    waiters.wake_all();
  }
  void arrive_and_wait() {
    if (++arrived == n) {
      complete();
      return;
    }
    const unsigned ph = phase;
    while (phase == ph) waiters.wait();
  }
  void arrive_and_drop() {
    if (--n != 0 && arrived == n) complete();
  }
};

// Convergence, for __activemask() in divergent code (filter_kernel's in-CTA candidate list: a
// loop whose trip count differs between lanes, a ballot and a shuffle over __activemask()). A lane
// at __activemask() waits until every lane of its warp is there too or parked (waiting at
// __syncthreads, or done with the block); the lanes there are the mask (the largest set the
// hardware could report), and the warp operations they then call with that mask meet in `sub`.
struct EmuConv {
  uint32_t parked = 0, arrived = 0, result = 0;
  unsigned gen = 0;
  EmuWaitList waiters;
  EmuBarrier sub{32};
  void try_form() {
    if (arrived == 0 || (arrived | parked) != 0xffffffffu) return;
    result = arrived;
    sub.reset(__builtin_popcount(arrived));
    arrived = 0;
    ++gen;
    waiters.wake_all();
  }
  void park(unsigned lane) {
    parked |= 1u << lane;
    if (arrived != 0) try_form();
  }
  void unpark(unsigned lane) { parked &= ~(1u << lane); }
  unsigned activemask(unsigned lane) {
    const unsigned g = gen;
    arrived |= 1u << lane;
    try_form();
    while (gen == g) waiters.wait();
    return result;
  }
};

// A fault on a guard page: a fiber overflowed its stack (the handler runs on its own stack).
inline void emu_fiber_segv(int sig, siginfo_t* si, void*) {
  const char* a = static_cast<const char*>(si->si_addr);
  const char* s = g_emu_sched.stacks;
  const size_t per = EmuSched::kGuard + EmuSched::kStack;
  if (s != nullptr && a >= s && a < s + EmuSched::kMaxFibers * per && (size_t)(a - s) % per < EmuSched::kGuard) {
    static const char msg[] = "emulation: a CUDA thread overflowed its fiber stack "
                              "(EmuSched::kStack in tests/emu/cuda_emu_fibers.h)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(134);
  }
  signal(sig, SIG_DFL);  // any other fault: the default action when the access repeats
}

inline void emu_fiber_main() {
  EmuSched& s = g_emu_sched;
  (*s.body)(s.cur->tid);
  s.cur->done = true;
  ++s.ndone;
  emu_fiber_switch(&s.cur->sp, s.main_sp);
  __builtin_unreachable();  // a finished fiber is never resumed
}

// Runs f over grid x block threads, blocks one after another, each block's threads as fibers on
// this thread. setup() / teardown() run before / after each block; done(t) in thread t when it
// returns from f. A block whose fibers all wait with none runnable is a deadlock of the kernel
// (say, a __syncthreads that not every thread reaches): reported, then abort().
template <typename Setup, typename Teardown, typename Done>
void emu_run(unsigned grid, unsigned block, const std::function<void()>& f, Setup setup,
             Teardown teardown, Done done) {
  EmuSched& s = g_emu_sched;
  const size_t per = EmuSched::kGuard + EmuSched::kStack;
  if (s.stacks == nullptr) {
    void* m = mmap(nullptr, EmuSched::kMaxFibers * per, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      perror("emulation: mmap of the fiber stacks");
      abort();
    }
    s.stacks = static_cast<char*>(m);
    for (size_t i = 0; i < EmuSched::kMaxFibers; ++i) mprotect(s.stacks + i * per, EmuSched::kGuard, PROT_NONE);
    static char altstack[1 << 16];
    stack_t ss{};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa{};
    sa.sa_sigaction = emu_fiber_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    if (const char* e = getenv("EMU_FIBER_SEED")) s.rng = strtoull(e, nullptr, 0);
    if (s.rng != 0) fprintf(stderr, "emulation: fibers in random order, EMU_FIBER_SEED=%llu\n",
                            (unsigned long long)s.rng);
  }
  const std::function<void(unsigned)> body = [&](unsigned t) {
    f();
    done(t);
  };
  s.body = &body;
  s.fibers.assign(block, EmuFiber{});
  s.runq.assign(block, nullptr);
  for (unsigned b = 0; b < grid; ++b) {
    setup();
    blockIdx.x = b;
    s.head = s.count = 0;
    s.ndone = 0;
    for (unsigned t = 0; t < block; ++t) {
      EmuFiber& fb = s.fibers[t];
      fb = EmuFiber{};
      fb.tid = t;
      // The stack as emu_fiber_switch leaves it: six registers, then the address it returns to
      // (emu_fiber_main), then a null return address for emu_fiber_main (which never returns),
      // so that it starts with the stack alignment of a called function.
      void** top = reinterpret_cast<void**>(s.stacks + (t + 1) * per);
      top[-1] = nullptr;
      top[-2] = reinterpret_cast<void*>(&emu_fiber_main);
      for (int r = 3; r <= 8; ++r) top[-r] = nullptr;
      fb.sp = top - 8;
      s.push(&fb);
    }
    while (s.count != 0) {
      s.cur = s.pop();
      threadIdx.x = s.cur->tid;
      emu_fiber_switch(&s.main_sp, s.cur->sp);
    }
    if (s.ndone != block) {
      fprintf(stderr, "emulation: deadlock in block %u of %u: threads", b, grid);
      for (unsigned t = 0; t < block; ++t)
        if (s.fibers[t].waiting) fprintf(stderr, " %u", t);
      fprintf(stderr, " wait (at a barrier, a warp operation or __activemask()) and no thread "
                      "can run\n");
      abort();
    }
    s.cur = nullptr;
    teardown();
  }
  s.body = nullptr;
}
