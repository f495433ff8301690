// dds_bench_nccl: vocabulary-parallel sampling over NCCL (dds_sample_nccl, libdds_nccl) against
// all-gather-then-sample (ncclAllGather of the bf16 logits slices, the reorder of the gathered
// [R][rows][V/R] buffer into [rows][V] rows, dds_sample on the full rows), one thread per GPU,
// every GPU of the machine (DDS_NCCL_RANKS=N limits it), bf16, shapes 4096 x 262144 and
// 256 x 151936, scenarios plain / top-k 50 / top-p 0.9 (temperature 1).
// Each timed call: a host barrier across the rank threads, then CUDA events around the call on
// each rank's stream; the call's time is the slowest rank's, and the table shows the median over
// 20 calls after 3 warm-ups. Inputs rotate over copies (>= 256 MB per rank) so that L2 holds
// nothing from the previous call. Also prints the one-read floor of one rank's slice and the bytes
// exchanged per row, and checks that the sharded tokens equal the full-row dds_sample tokens of
// the same inputs (near-ties of float64 block sums would be the only allowed differences).
// A benchmark, not a test: prints a markdown table. Needs >= 2 GPUs (else says so and exits 0).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dds/dds_nccl.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"  // BENCH_CHECK, BENCH_DDS

#define CKD(x)                                                                                \
  do {                                                                                        \
    dds_status s_ = (x);                                                                      \
    if (s_ != DDS_OK) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s %s\n", __FILE__, __LINE__, #x, dds_last_error(),    \
                   dds_nccl_last_error());                                                    \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CKN(x)                                                                                 \
  do {                                                                                         \
    ncclResult_t r_ = (x);                                                                     \
    if (r_ != ncclSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

constexpr int kWarm = 3, kReps = 20;

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lk(m_);
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen != gen_; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

__device__ uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// sigma * N(0, 1) in bf16 from a hash of (seed, global row, global column): every rank's slice is
// a column slice of the same full logits, and the full rows of the baseline are the same values.
__global__ void fill_kernel(__nv_bfloat16* p, int rows, int len, int off, int V, float sigma,
                            uint64_t seed) {
  const size_t n = (size_t)rows * len;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const size_t r = i / len, c = i % len + off;
    const uint64_t h = mix64(seed ^ mix64(r * (uint64_t)V + c + 1));
    const float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f), u2 = (h & 0xffffff) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16(sigma * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
  }
}

__global__ void read_kernel(const uint4* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

struct Scenario {
  const char* name;
  int32_t top_k;
  float top_p;
};
const Scenario kScen[] = {{"plain", 0, 1.f}, {"top-k 50", 50, 1.f}, {"top-p 0.9", 0, 0.9f}};
constexpr int kNumScen = 3;

struct Result {  // per scenario: per-rank per-call times (us)
  std::vector<float> sharded, gather, reorder, sample, total;
  int64_t exchanged_row_bytes = 0;
  int mismatches = -1;
};

double median_of_max(const std::vector<std::vector<float>>& per_rank) {
  std::vector<float> m(per_rank[0].size(), 0.f);
  for (const auto& v : per_rank)
    for (size_t i = 0; i < v.size(); ++i) m[i] = std::max(m[i], v[i]);
  std::sort(m.begin(), m.end());
  return m.empty() ? 0.0 : m[m.size() / 2];
}

struct Shape {
  int rows, V;
};

struct Shared {
  int R;
  ncclUniqueId id;
  Shape shape;
  Barrier* bar;
  // [rank][scenario] times
  std::vector<std::vector<std::vector<float>>> sharded, gather, reorder, sample, total;
  std::vector<double> floor_us;
  std::vector<int64_t> row_bytes;
  std::vector<int> mismatches;
  std::vector<std::string> notes;
};

void rank_main(int rank, Shared* S) {
  const int R = S->R, rows = S->shape.rows, V = S->shape.V;
  BENCH_CHECK(cudaSetDevice(rank));
  ncclComm_t comm;
  CKN(ncclCommInitRank(&comm, R, S->id, rank));
  cudaStream_t st;
  BENCH_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const int off = (int)((int64_t)V * rank / R), len = (int)((int64_t)V * (rank + 1) / R) - off;
  const bool even = V % R == 0;  // the baseline all-gathers equal slices
  const size_t slice_bytes = (size_t)rows * len * 2;
  const int copies = (int)std::max<size_t>(2, std::min<size_t>(8, (256u << 20) / slice_bytes + 1));
  std::vector<__nv_bfloat16*> slices(copies);
  for (int c = 0; c < copies; ++c) {
    BENCH_CHECK(cudaMalloc(&slices[c], slice_bytes));
    fill_kernel<<<1024, 256, 0, st>>>(slices[c], rows, len, off, V, 4.f, 1000 + c);
  }
  BENCH_CHECK(cudaGetLastError());
  __nv_bfloat16 *gath = nullptr, *full = nullptr;
  if (even) {
    BENCH_CHECK(cudaMalloc(&gath, slice_bytes * R));
    BENCH_CHECK(cudaMalloc(&full, slice_bytes * R));
  }
  int32_t *tok_sh, *tok_full;
  float *lp_sh, *lp_full;
  unsigned* sink;
  BENCH_CHECK(cudaMalloc(&tok_sh, rows * 4));
  BENCH_CHECK(cudaMalloc(&tok_full, rows * 4));
  BENCH_CHECK(cudaMalloc(&lp_sh, rows * 4));
  BENCH_CHECK(cudaMalloc(&lp_full, rows * 4));
  BENCH_CHECK(cudaMalloc(&sink, 4));

  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CUDA;
  c.device = rank;
  c.vocab_size = V;
  c.max_rows = rows;
  c.max_requests = rows;
  dds_sampler* s = nullptr;
  CKD(dds_create(&c, &s));

  // one-read floor of this rank's slice
  {
    cudaEvent_t e0, e1;
    BENCH_CHECK(cudaEventCreate(&e0));
    BENCH_CHECK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int i = 0; i < kWarm + kReps; ++i) {
      BENCH_CHECK(cudaEventRecord(e0, st));
      read_kernel<<<132 * 8, 512, 0, st>>>((const uint4*)slices[i % copies], slice_bytes / 16, sink);
      BENCH_CHECK(cudaEventRecord(e1, st));
      BENCH_CHECK(cudaEventSynchronize(e1));
      float ms;
      BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= kWarm) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    S->floor_us[rank] = t[t.size() / 2];
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }

  cudaEvent_t ev[5];
  for (auto& e : ev) BENCH_CHECK(cudaEventCreate(&e));
  for (int sc = 0; sc < kNumScen; ++sc) {
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = rows;
    a.num_requests = rows;
    a.dtype = DDS_DTYPE_BF16;
    a.temperature = 1.f;
    a.top_k = kScen[sc].top_k;
    a.top_p = kScen[sc].top_p;
    a.seed = 7;
    a.step = 3;
    a.logprobs = lp_sh;
    a.tokens = tok_sh;
    dds_shard_args sh;
    dds_shard_args_init(&sh, sizeof sh);
    sh.rank = rank;
    sh.world_size = R;
    sh.vocab_offset = off;
    sh.vocab_slice = len;
    dds_shard_plan plan;
    plan.struct_size = sizeof plan;
    CKD(dds_sample_shard_plan(s, &a, &sh, &plan));
    int64_t rb = 0;
    for (int q = 0; q < plan.num_rounds; ++q) rb += plan.row_bytes[q];
    S->row_bytes[rank * kNumScen + sc] = rb * R;  // received per row, own record included
    size_t wsb = 0;
    CKD(dds_sample_nccl_workspace_bytes(s, &a, &sh, &wsb));
    void* ws;
    BENCH_CHECK(cudaMalloc(&ws, wsb));
    auto& T_sh = S->sharded[rank][sc];
    auto& T_g = S->gather[rank][sc];
    auto& T_r = S->reorder[rank][sc];
    auto& T_s = S->sample[rank][sc];
    auto& T_t = S->total[rank][sc];
    for (int i = 0; i < kWarm + kReps; ++i) {
      a.logits = slices[i % copies];
      a.row_stride = len;
      S->bar->wait();
      BENCH_CHECK(cudaEventRecord(ev[0], st));
      CKD(dds_sample_nccl(s, &a, &sh, comm, ws, wsb, (dds_stream)st));
      BENCH_CHECK(cudaEventRecord(ev[1], st));
      BENCH_CHECK(cudaEventSynchronize(ev[1]));
      float ms;
      BENCH_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
      if (i >= kWarm) T_sh.push_back(ms * 1000.f);
    }
    if (even) {
      dds_sample_args f = a;
      f.tokens = tok_full;
      f.logprobs = lp_full;
      f.logits = full;
      f.row_stride = V;
      for (int i = 0; i < kWarm + kReps; ++i) {
        S->bar->wait();
        BENCH_CHECK(cudaEventRecord(ev[0], st));
        CKN(ncclAllGather(slices[i % copies], gath, slice_bytes, ncclUint8, comm, st));
        BENCH_CHECK(cudaEventRecord(ev[1], st));
        for (int r = 0; r < R; ++r)
          BENCH_CHECK(cudaMemcpy2DAsync(full + (size_t)r * len, (size_t)V * 2,
                               (const char*)gath + (size_t)r * slice_bytes, (size_t)len * 2,
                               (size_t)len * 2, rows, cudaMemcpyDeviceToDevice, st));
        BENCH_CHECK(cudaEventRecord(ev[2], st));
        CKD(dds_sample(s, &f, (dds_stream)st));
        BENCH_CHECK(cudaEventRecord(ev[3], st));
        BENCH_CHECK(cudaEventSynchronize(ev[3]));
        float m01, m12, m23;
        BENCH_CHECK(cudaEventElapsedTime(&m01, ev[0], ev[1]));
        BENCH_CHECK(cudaEventElapsedTime(&m12, ev[1], ev[2]));
        BENCH_CHECK(cudaEventElapsedTime(&m23, ev[2], ev[3]));
        if (i >= kWarm) {
          T_g.push_back(m01 * 1000.f);
          T_r.push_back(m12 * 1000.f);
          T_s.push_back(m23 * 1000.f);
          T_t.push_back((m01 + m12 + m23) * 1000.f);
        }
      }
      // Same inputs (copy (kWarm + kReps - 1) % copies) both ways: the tokens must agree.
      a.logits = slices[(kWarm + kReps - 1) % copies];
      S->bar->wait();
      CKD(dds_sample_nccl(s, &a, &sh, comm, ws, wsb, (dds_stream)st));
      BENCH_CHECK(cudaStreamSynchronize(st));
      std::vector<int32_t> h1(rows), h2(rows);
      BENCH_CHECK(cudaMemcpy(h1.data(), tok_sh, rows * 4, cudaMemcpyDeviceToHost));
      BENCH_CHECK(cudaMemcpy(h2.data(), tok_full, rows * 4, cudaMemcpyDeviceToHost));
      int mm = 0;
      for (int r = 0; r < rows; ++r) mm += h1[r] != h2[r];
      S->mismatches[rank * kNumScen + sc] = mm;
    }
    BENCH_CHECK(cudaFree(ws));
  }
  S->bar->wait();
  for (auto& e : ev) cudaEventDestroy(e);
  dds_destroy(s);
  for (auto* p : slices) cudaFree(p);
  cudaFree(gath);
  cudaFree(full);
  cudaFree(tok_sh);
  cudaFree(tok_full);
  cudaFree(lp_sh);
  cudaFree(lp_full);
  cudaFree(sink);
  cudaStreamDestroy(st);
  ncclCommDestroy(comm);
}

}  // namespace

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  int R = std::min(ndev, 8);
  if (const char* e = std::getenv("DDS_NCCL_RANKS")) R = std::min(R, std::atoi(e));
  if (R < 2) {
    std::printf("dds_bench_nccl: skipped: needs >= 2 CUDA devices (found %d)\n", ndev);
    return 0;
  }
  cudaDeviceProp prop;
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  int nv = 0;
  ncclGetVersion(&nv);
  std::printf("dds_bench_nccl: %d x %s, NCCL %d, bf16, median of %d calls (slowest rank each)\n\n",
              R, prop.name, nv, kReps);
  std::printf("| rows | V | R | scenario | slice floor us | dds sharded us | all-gather us | reorder us "
              "| dds_sample us | gather+sample us | speed-up | exchanged B/row | all-gather B/row "
              "| token mismatches |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const Shape shapes[] = {{4096, 262144}, {256, 151936}};
  for (const Shape& shp : shapes) {
    Shared S;
    S.R = R;
    S.shape = shp;
    CKN(ncclGetUniqueId(&S.id));
    Barrier bar(R);
    S.bar = &bar;
    auto mk = [&] {
      return std::vector<std::vector<std::vector<float>>>(R, std::vector<std::vector<float>>(kNumScen));
    };
    S.sharded = mk();
    S.gather = mk();
    S.reorder = mk();
    S.sample = mk();
    S.total = mk();
    S.floor_us.assign(R, 0.0);
    S.row_bytes.assign(R * kNumScen, 0);
    S.mismatches.assign(R * kNumScen, -1);
    std::vector<std::thread> th;
    for (int r = 0; r < R; ++r) th.emplace_back(rank_main, r, &S);
    for (auto& t : th) t.join();
    double fl = 0;
    for (double f : S.floor_us) fl = std::max(fl, f);
    for (int sc = 0; sc < kNumScen; ++sc) {
      auto pick = [&](std::vector<std::vector<std::vector<float>>>& X) {
        std::vector<std::vector<float>> v;
        for (int r = 0; r < R; ++r) v.push_back(X[r][sc]);
        return v;
      };
      const double tsh = median_of_max(pick(S.sharded));
      const bool base = !S.total[0][sc].empty();
      int mm = 0;
      for (int r = 0; r < R; ++r) mm = std::max(mm, S.mismatches[r * kNumScen + sc]);
      char b[512];
      if (base) {
        const double tg = median_of_max(pick(S.gather)), tr = median_of_max(pick(S.reorder)),
                     ts = median_of_max(pick(S.sample)), tt = median_of_max(pick(S.total));
        std::snprintf(b, sizeof b,
                      "| %d | %d | %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2fx | %lld | "
                      "%lld | %d |",
                      shp.rows, shp.V, R, kScen[sc].name, fl, tsh, tg, tr, ts, tt, tt / tsh,
                      (long long)S.row_bytes[sc], (long long)shp.V * 2, mm);
      } else {
        std::snprintf(b, sizeof b,
                      "| %d | %d | %d | %s | %.1f | %.1f | - | - | - | - | - | %lld | %lld | - |",
                      shp.rows, shp.V, R, kScen[sc].name, fl, tsh, (long long)S.row_bytes[sc],
                      (long long)shp.V * 2);
      }
      std::printf("%s\n", b);
      std::fflush(stdout);
    }
  }
  std::printf("\nspeed-up = (all-gather + reorder + dds_sample) / dds sharded. The all-gather column "
              "is NCCL moving every rank's bf16 slice; reorder turns the rank-major gathered buffer "
              "into [rows][V] rows. exchanged B/row: record bytes each rank receives per row over "
              "all rounds (its own included).\n");
  return 0;
}
