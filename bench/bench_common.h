// Shared harness of dds_bench: device buffers filled with sigma * N(0, 1), the one-read floor
// kernels, event timing (median of >= 20 after warm-up) over rotating input slices so that L2
// does not flatter, and the table printer. Used by bench.cu (dds_sample) and bench_stash.cu.
#pragma once
#include <cuda_runtime.h>
#include <dds/dds.h>
#include <dds/dds_shard.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define BENCH_CHECK(x)                                                                   \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)
#define BENCH_DDS(x)                                                                     \
  do {                                                                                   \
    dds_status s_ = (x);                                                                 \
    if (s_ != DDS_OK) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, dds_last_error()); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// A CUDA graph of the work fn() queues on stream `st` (captured thread-locally, instantiated; the
// caller launches it and destroys it with cudaGraphExecDestroy); a CUDA error exits.
template <class F>
cudaGraphExec_t capture_graph(cudaStream_t st, F fn) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  BENCH_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  fn();
  BENCH_CHECK(cudaStreamEndCapture(st, &g));
  BENCH_CHECK(cudaGraphInstantiate(&e, g, 0));
  cudaGraphDestroy(g);  // (the executable graph keeps what it needs)
  return e;
}

// A sampler (backend DDS_BACKEND_*) for V columns and `rows` rows, up to one request per row
// (stash width: at least 20 and `stash_width`); nullptr, with dds_last_error() printed, when
// dds_create fails.
inline dds_sampler* make_sampler(int backend, int V, int rows, int stash_width = 0) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = rows;
  c.max_requests = rows;
  if (stash_width > 0) c.max_stash_width = std::max(20, stash_width);
  dds_sampler* s = nullptr;
  if (dds_create(&c, &s) != DDS_OK) {
    std::printf("dds_create: %s\n", dds_last_error());
    return nullptr;
  }
  return s;
}
inline dds_sampler* make_cuda_sampler(int V, int rows, int stash_width = 0) {
  return make_sampler(DDS_BACKEND_CUDA, V, rows, stash_width);
}

// Rank r of R in vocabulary-parallel sampling over V columns: the r-th of R near-equal
// consecutive column slices, top-k candidates up to max_top_k, round 0.
inline dds_shard_args shard_rank(int V, int r, int R, int max_top_k = 64) {
  dds_shard_args a;
  dds_shard_args_init(&a, sizeof a);
  a.rank = r;
  a.world_size = R;
  a.vocab_offset = (int32_t)((int64_t)V * r / R);
  a.vocab_slice = (int32_t)((int64_t)V * (r + 1) / R) - a.vocab_offset;
  a.max_top_k = max_top_k;
  return a;
}

namespace bench {

// A pool of `slices` copies-worth of input (each slice `bytes` long, 256-byte aligned), filled
// with sigma * N(0, 1) in the given dtype; slice i is used by iteration i % slices.
struct Pool {
  void* base = nullptr;
  size_t slice_bytes = 0;
  int slices = 0;
  void* slice(int i) const { return (char*)base + (size_t)(i % slices) * slice_bytes; }
};

Pool make_pool(size_t bytes, int dtype, float sigma, uint64_t seed);
void free_pool(Pool& p);
void refill(Pool& p, int dtype, float sigma, uint64_t seed);

// Median time in microseconds of fn(i) over `reps` runs after `warm` warm-up runs (events).
double time_us(const std::function<void(int)>& fn, int reps = 25, int warm = 3);

// The same, but each distinct fn(i % slices, stream) is captured once into a CUDA graph and the
// graphs are replayed: no host launch overhead in the numbers (what a graph-captured decoder sees).
double time_graph_us(const std::function<void(int, cudaStream_t)>& fn, int slices, int reps = 25,
                     int warm = 3);

// Floors (graph replays): one read of `bytes` (each of `n` input pointers) / one read plus one write.
double floor_read_us(const Pool& a, const Pool* b, size_t bytes);
double floor_read_write_us(const Pool& a, size_t bytes, size_t write_bytes);

struct Row {
  std::string scenario, dtype;
  int V, rows;
  double mb, floor_us, dds_us;
  std::string note;
};
void print_header();
void print_row(const Row& r);

extern bool g_quick;
}  // namespace bench

// bench_stash.cu
void run_stash_bench();
