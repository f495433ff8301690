// dds_bench_shard: vocabulary-parallel sampling (docs/vocab_parallel.md) on ONE GPU.
//
// R ranks are simulated on column slices of one logits buffer (slice = pointer offset, row stride
// V), device-to-device copies stand in for the all-gather. For each R in {2, 4, 8}, shape and
// scenario it times, for rank 0 (the ranks are symmetric), from CUDA graph replays:
//   floor   one plain read of the rank's slice (rows x V/R elements, same strided rows), same run
//   partial every dds_sample_partial round of the rank (the all-gathers excluded)
//   finish  dds_sample_finish of the rank
// and prints a markdown table with the record bytes each rank sends per row (sum over rounds).
// It also checks that the sharded tokens equal the unsharded CUDA dds_sample on the same logits
// (near-ties of block sums may differ; the count is printed).
//
// Usage: ./dds_bench_shard [--quick]   (finishes in well under a minute on an H200)
#include <cuda_runtime.h>
#include <dds/dds.h>
#include <dds/dds_shard.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.h"  // BENCH_CHECK, BENCH_DDS, shard_rank


namespace {

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}

// sigma * N(0, 1) (Box-Muller on a counter hash), bf16 (dt 1) or f32 (dt 0).
__global__ void fill_kernel(void* p, size_t n, int dt, float sigma, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float u1 = ((hash32(seed * 0x9E3779B97F4A7C15ull + 2 * i) >> 8) + 0.5f) * (1.f / 16777216.f);
    const float u2 = (hash32(seed * 0x9E3779B97F4A7C15ull + 2 * i + 1) >> 8) * (1.f / 16777216.f);
    const float v = sigma * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if (dt == 0) {
      static_cast<float*>(p)[i] = v;
    } else {
      uint32_t b = __float_as_uint(v);
      b += 0x7fffu + ((b >> 16) & 1u);
      static_cast<uint16_t*>(p)[i] = (uint16_t)(b >> 16);
    }
  }
}

// The one-read floor: reads `cols` elements of each of `rows` rows (stride `stride` elements),
// 16-byte loads when aligned; one CTA per row chunk; writes only if a sum is impossible.
__global__ void read_kernel(const char* base, int rows, long long stride_bytes, long long row_bytes,
                            float* sink) {
  const int row = blockIdx.y;
  const char* p = base + (long long)row * stride_bytes;
  float acc = 0.f;
  const bool vec = ((uintptr_t)p % 16 == 0) && (row_bytes % 16 == 0);
  if (vec) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    const long long n = row_bytes / 16;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
      const uint4 v = __ldcs(q + i);
      acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
    }
  } else {
    const uint32_t* q = reinterpret_cast<const uint32_t*>(p);
    const long long n = row_bytes / 4;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
      acc += __uint_as_float(__ldcs(q + i));
  }
  if (acc == 1234.5678f) sink[0] = acc;
}

struct Timer {
  cudaStream_t st;
  // Median over `reps` graph replays of each graph in turn (graph i % graphs.size()).
  double median_us(const std::vector<cudaGraphExec_t>& graphs, int reps, int warm) {
    cudaEvent_t a, b;
    BENCH_CHECK(cudaEventCreate(&a));
    BENCH_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warm; ++i) BENCH_CHECK(cudaGraphLaunch(graphs[i % graphs.size()], st));
    BENCH_CHECK(cudaStreamSynchronize(st));
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      BENCH_CHECK(cudaEventRecord(a, st));
      BENCH_CHECK(cudaGraphLaunch(graphs[i % graphs.size()], st));
      BENCH_CHECK(cudaEventRecord(b, st));
      BENCH_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1000.f);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  cudaGraphExec_t capture(const std::function<void()>& fn) { return capture_graph(st, fn); }
};

struct Scenario {
  const char* name;
  int k;
  float p;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--quick")) quick = true;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("dds_bench_shard: no CUDA device, skipped\n");
    return 0;
  }
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  const auto t_start = std::chrono::steady_clock::now();
  std::printf("# dds_bench_shard on %s (one GPU; R ranks simulated on column slices)\n\n", prop.name);
  std::printf("Times in us, medians of CUDA graph replays. floor = one plain read of the rank's slice; "
              "partial = all dds_sample_partial rounds of one rank; finish = dds_sample_finish of one "
              "rank; total = partial + finish (all-gathers excluded); ratio = total / floor; "
              "record = bytes one rank sends per row (all rounds).\n\n");
  std::printf("| R | scenario | dtype | rows | V | slice MB | floor us | partial us | finish us | "
              "total us | ratio | record B/row | tokens = unsharded |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);

  struct Shape {
    int rows, V, dt;
  };
  std::vector<Shape> shapes = {{4096, 262144, 1}, {256, 151936, 1}, {256, 151936, 0}};
  const Scenario scen[] = {{"plain", 0, 1.f}, {"top-k 50", 50, 1.f}, {"top-p 0.9", 0, 0.9f}};
  const int Rs[] = {2, 4, 8};
  float* sink;
  BENCH_CHECK(cudaMalloc(&sink, 256));
  Timer tm;
  BENCH_CHECK(cudaStreamCreateWithFlags(&tm.st, cudaStreamNonBlocking));
  for (const Shape& sh : shapes) {
    const int rows = sh.rows, V = sh.V, dt = sh.dt;
    const size_t esz = dt == 0 ? 4 : 2;
    const size_t full = (size_t)rows * V * esz;
    // Enough copies that rank 0's slices of all copies exceed L2 several times at R = 8 (so that
    // neither the floor nor dds is flattered by L2), within 1.5 GB.
    int copies = (int)std::min<size_t>(8, std::max<size_t>(1, (size_t)400e6 / (full / 8 + 1)));
    copies = (int)std::max<size_t>(1, std::min<size_t>(copies, (size_t)1500e6 / full));
    std::vector<void*> buf(copies);
    for (int c = 0; c < copies; ++c) {
      BENCH_CHECK(cudaMalloc(&buf[c], full));
      fill_kernel<<<2048, 256>>>(buf[c], (size_t)rows * V, dt, 2.f, 17 + c);
    }
    BENCH_CHECK(cudaDeviceSynchronize());
    dds_sampler_config cfg;
    dds_sampler_config_init(&cfg, sizeof cfg);
    cfg.backend = DDS_BACKEND_CUDA;
    cfg.vocab_size = V;
    cfg.max_rows = rows;
    cfg.max_requests = rows;
    dds_sampler* s = nullptr;
    BENCH_DDS(dds_create(&cfg, &s));
    int32_t *tok, *tok_ref;
    float* conf;
    BENCH_CHECK(cudaMalloc(&tok, sizeof(int32_t) * rows));
    BENCH_CHECK(cudaMalloc(&tok_ref, sizeof(int32_t) * rows));
    BENCH_CHECK(cudaMalloc(&conf, sizeof(float) * rows));
    for (int R : Rs) {
      for (const Scenario& sc : scen) {
        if (quick && R != 8) continue;
        dds_sample_args a;
        dds_sample_args_init(&a, sizeof a);
        a.num_rows = rows;
        a.num_requests = rows;
        a.dtype = dt;
        a.temperature = 1.f;
        a.top_k = sc.k;
        a.top_p = sc.p;
        a.seed = 42;
        a.step = 1;
        a.tokens = tok;
        a.confidence = conf;
        std::vector<dds_sample_args> args(R, a);
        std::vector<dds_shard_args> shd(R);
        for (int r = 0; r < R; ++r) {
          shd[r] = shard_rank(V, r, R);
          args[r].row_stride = V;
        }
        dds_shard_plan plan;
        plan.struct_size = sizeof plan;
        BENCH_DDS(dds_sample_shard_plan(s, &args[0], &shd[0], &plan));
        int64_t max_rec = 8, row_sent = 0;
        for (int q = 0; q < plan.num_rounds; ++q) {
          max_rec = std::max(max_rec, plan.record_bytes[q]);
          row_sent += plan.row_bytes[q];
        }
        unsigned char* gathered;
        BENCH_CHECK(cudaMalloc(&gathered, (size_t)plan.gathered_bytes));
        std::vector<unsigned char*> rec(R);
        for (int r = 0; r < R; ++r) BENCH_CHECK(cudaMalloc(&rec[r], (size_t)max_rec));
        auto set_copy = [&](int c) {
          for (int r = 0; r < R; ++r)
            args[r].logits = static_cast<const char*>(buf[c]) + esz * shd[r].vocab_offset;
        };
        auto partial_rank = [&](int r, int q) {
          shd[r].round = q;
          BENCH_DDS(dds_sample_partial(s, &args[r], &shd[r], gathered, rec[r], (dds_stream)tm.st));
        };
        auto gather = [&](int q) {
          for (int r = 0; r < R; ++r)
            BENCH_CHECK(cudaMemcpyAsync(gathered + plan.gathered_offset[q] + r * plan.record_bytes[q], rec[r],
                               (size_t)plan.record_bytes[q], cudaMemcpyDeviceToDevice, tm.st));
        };
        auto whole = [&]() {
          for (int q = 0; q < plan.num_rounds; ++q) {
            for (int r = 0; r < R; ++r) partial_rank(r, q);
            gather(q);
          }
          BENCH_DDS(dds_sample_finish(s, &args[0], &shd[0], gathered, (dds_stream)tm.st));
        };
        // One full run on copy 0 (fills `gathered` for every round), checked against dds_sample.
        set_copy(0);
        const auto t0 = std::chrono::steady_clock::now();
        whole();
        BENCH_CHECK(cudaStreamSynchronize(tm.st));
        const double once_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        dds_sample_args u = a;
        u.logits = buf[0];
        u.tokens = tok_ref;
        u.confidence = nullptr;
        BENCH_DDS(dds_sample(s, &u, (dds_stream)tm.st));
        BENCH_CHECK(cudaStreamSynchronize(tm.st));
        std::vector<int32_t> h1(rows), h2(rows);
        BENCH_CHECK(cudaMemcpy(h1.data(), tok, 4 * rows, cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy(h2.data(), tok_ref, 4 * rows, cudaMemcpyDeviceToHost));
        int same = 0;
        for (int i = 0; i < rows; ++i) same += h1[i] == h2[i];
        // Timing: slow (first-version) kernels get fewer repetitions so the run stays short.
        const int reps = once_ms > 200 ? 1 : once_ms > 20 ? 5 : 20;
        const int warm = once_ms > 200 ? 0 : 2;
        // Graphs per copy. The partial graph of rank 0 reads the gathered records of copy 0 for
        // its later rounds (the work per row is the same for every copy of these logits).
        std::vector<cudaGraphExec_t> gf, gp, gfin;
        const int ncopy = reps == 1 ? 1 : copies;
        const long long slice_bytes = (long long)shd[0].vocab_slice * (long long)esz;
        for (int c = 0; c < ncopy; ++c) {
          set_copy(c);
          const char* base = static_cast<const char*>(args[0].logits);
          gf.push_back(tm.capture([&]() {
            dim3 grid((unsigned)std::max<long long>(1, std::min<long long>(8, slice_bytes / 8192)),
                      (unsigned)rows);
            read_kernel<<<grid, 256, 0, tm.st>>>(base, rows, (long long)V * (long long)esz,
                                                 slice_bytes, sink);
          }));
          gp.push_back(tm.capture([&]() {
            for (int q = 0; q < plan.num_rounds; ++q) partial_rank(0, q);
          }));
          gfin.push_back(tm.capture([&]() {
            BENCH_DDS(dds_sample_finish(s, &args[0], &shd[0], gathered, (dds_stream)tm.st));
          }));
        }
        const double floor_us = tm.median_us(gf, 20, 2);
        const double part_us = tm.median_us(gp, reps, warm);
        const double fin_us = tm.median_us(gfin, reps, warm);
        for (auto g : gf) cudaGraphExecDestroy(g);
        for (auto g : gp) cudaGraphExecDestroy(g);
        for (auto g : gfin) cudaGraphExecDestroy(g);
        std::printf("| %d | %s | %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %lld | %d/%d |\n",
                    R, sc.name, dt == 0 ? "f32" : "bf16", rows, V,
                    (double)rows * (double)slice_bytes / 1e6, floor_us, part_us, fin_us,
                    part_us + fin_us, (part_us + fin_us) / floor_us, (long long)row_sent, same, rows);
        std::fflush(stdout);
        for (auto* p : rec) cudaFree(p);
        cudaFree(gathered);
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        if (elapsed > 50) {
          std::printf("\n(stopped after %.0f s: time budget of the benchmark)\n", elapsed);
          return 0;
        }
      }
    }
    cudaFree(tok);
    cudaFree(tok_ref);
    cudaFree(conf);
    dds_destroy(s);
    for (void* p : buf) cudaFree(p);
  }
  return 0;
}
