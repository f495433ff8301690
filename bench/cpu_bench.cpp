// CPU backend benchmark: ns per logits element of one dds_sample call on the CPU backend, for the
// plain step with every statistic (token, logprob, argmax, confidence, margin, entropy), one
// request, T = 0.8, f32 logits = 3 * N(0, 1), 1 and more worker threads; then top-k 50 and
// top-p 0.9 steps single-threaded.
//
//   dds_cpu_bench [threads...]        (default: 1 2)
//
// Prints one line per (shape, threads): rows, V, threads, ms per call and ns per element (median
// and fastest call), and the median CPU time per element (CLOCK_PROCESS_CPUTIME_ID: all threads
// of the process; with 1 thread the figure that other work on a shared machine moves least).
// bench/cpu_bench.py runs it beside the numpy multi-pass form of the same step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "dds/dds.h"

namespace {

struct Shape {
  int32_t rows, vocab;
  int32_t top_k = 0;
  float top_p = 1.f;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(const Shape& sh, int threads) {
  dds_sampler_config cfg;
  dds_sampler_config_init(&cfg, sizeof cfg);
  cfg.backend = DDS_BACKEND_CPU;
  cfg.vocab_size = sh.vocab;
  cfg.max_rows = sh.rows;
  cfg.max_requests = 1;
#ifndef DDS_CPU_BENCH_NO_THREADS
  cfg.num_threads = threads;
#else
  if (threads != 1) return 0;  // a library without the field: single-threaded only
#endif
  dds_sampler* s = nullptr;
  if (dds_create(&cfg, &s) != DDS_OK) {
    std::fprintf(stderr, "dds_create: %s\n", dds_last_error());
    return 1;
  }
  const size_t n = (size_t)sh.rows * sh.vocab;
  std::vector<float> logits(n);
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (auto& v : logits) v = nd(rng);
  std::vector<int32_t> offs = {0, sh.rows}, tokens(sh.rows), amax(sh.rows);
  std::vector<float> lp(sh.rows), conf(sh.rows), margin(sh.rows), ent(sh.rows);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = sh.rows;
  a.num_requests = 1;
  a.row_offsets = offs.data();
  a.logits = logits.data();
  a.dtype = DDS_DTYPE_F32;
  a.temperature = 0.8f;
  a.top_k = sh.top_k;
  a.top_p = sh.top_p;
  a.seed = 42;
  a.tokens = tokens.data();
  a.logprobs = lp.data();
  a.argmax = amax.data();
  a.confidence = conf.data();
  a.margin = margin.data();
  a.entropy = ent.data();
  std::vector<double> times, cpu_times;
  double total = 0;
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  };
  for (int call = 0; call < 1000 && (call < 4 || total < 0.5); ++call) {
    a.step = (uint32_t)call;
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    if (dds_sample(s, &a, nullptr) != DDS_OK) {
      std::fprintf(stderr, "dds_sample: %s\n", dds_last_error());
      return 1;
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double dc = cpu_now() - c0;
    if (call > 0) {  // the first call warms caches and pages
      times.push_back(dt);
      cpu_times.push_back(dc);
      total += dt;
    }
  }
  const double t = median(times), best = *std::min_element(times.begin(), times.end());
  char filt[32] = "";
  if (sh.top_k) std::snprintf(filt, sizeof filt, "  top-k %d", sh.top_k);
  if (sh.top_p < 1.f) std::snprintf(filt, sizeof filt, "  top-p %.2g", sh.top_p);
  std::printf("dds    rows %5d  V %6d  threads %d  %9.3f ms/call  %7.2f ns/element  (fastest %7.2f)  cpu %7.2f%s\n",
              sh.rows, sh.vocab, threads, t * 1e3, t * 1e9 / (double)n, best * 1e9 / (double)n,
              median(cpu_times) * 1e9 / (double)n, filt);
  std::fflush(stdout);
  dds_destroy(s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads;
  for (int i = 1; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  const Shape shapes[] = {{1600, 1025}, {64, 32000}, {16, 151936}, {8, 262144}, {8, 1025},
                          {1, 1025}};
  for (const Shape& sh : shapes)
    for (int th : threads)
      if (run(sh, th) != 0) return 1;
  // Filtered steps, single-threaded.
  const Shape filtered[] = {{64, 32000, 50, 1.f},    {64, 32000, 0, 0.9f},  {16, 151936, 50, 1.f},
                            {16, 151936, 0, 0.9f}, {8, 262144, 50, 1.f}, {8, 262144, 0, 0.9f}};
  for (const Shape& sh : filtered)
    if (run(sh, 1) != 0) return 1;
  return 0;
}
