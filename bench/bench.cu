// dds_bench: times dds_sample against the one-read floor measured in the same run.
// Usage: dds_bench [--quick] [--only sample|stash]
// dds_sample and the floors are timed as CUDA-graph replays (no host launch overhead).
// Table: scenario, dtype, V, rows, MB (bytes the floor reads), floor us, dds us, ratio, note.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <map>

#include "bench_common.h"
#include "rng.h"

namespace bench {

bool g_quick = false;

namespace {
__device__ __forceinline__ float gauss(uint64_t seed, uint64_t i) {
  const dds::Philox4 r = dds::philox4x32_10((uint32_t)i, (uint32_t)(i >> 32), 0, 0, (uint32_t)seed,
                                            (uint32_t)(seed >> 32));
  const float u1 = ((r.x[0] >> 8) + 0.5f) * (1.f / 16777216.f);
  const float u2 = (r.x[1] >> 8) * (1.f / 16777216.f);
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}
__global__ void fill_kernel(void* p, size_t n, int dtype, float sigma, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float v = sigma * gauss(seed, i);
    if (dtype == 0) ((float*)p)[i] = v;
    else if (dtype == 1) {
      uint32_t b = __float_as_uint(v);
      b += 0x7fffu + ((b >> 16) & 1u);
      ((uint16_t*)p)[i] = (uint16_t)(b >> 16);
    } else {
      ((__half*)p)[i] = __float2half_rn(v);
    }
  }
}
__global__ void read_kernel(const uint4* a, const uint4* b, size_t n16, float* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = a[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
    if (b) {
      const uint4 w = b[i];
      acc ^= w.x ^ w.y ^ w.z ^ w.w;
    }
  }
  if (acc == 0x12345678u) sink[0] = (float)acc;
}
// Reads n16 16-byte words and writes `ratio` of that (bf16 probs from f32 logits: 1/2).
__global__ void read_write_kernel(const uint4* a, size_t n16, uint4* out, size_t out16) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = a[i];
    const size_t j = i * out16 / n16;
    if (j < out16 && (i * out16) % n16 < out16) out[j] = make_uint4(v.x ^ 1, v.y, v.z, v.w);
  }
}
int grid_for(size_t n16) {
  static int sms = 0;
  if (!sms) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t want = (n16 + 255) / 256;
  return (int)std::min<size_t>(want, (size_t)sms * 8);
}
float* g_sink = nullptr;
void* g_out_pool = nullptr;
size_t g_out_bytes = 0;
}  // namespace

Pool make_pool(size_t bytes, int dtype, float sigma, uint64_t seed) {
  Pool p;
  p.slice_bytes = (bytes + 255) & ~(size_t)255;
  // Rotate through >= 512 MB (10x the L2) or at least 2 slices, at most 64.
  const size_t target = (size_t)512 << 20;
  p.slices = (int)std::max<size_t>(2, std::min<size_t>(64, (target + p.slice_bytes - 1) / p.slice_bytes));
  BENCH_CHECK(cudaMalloc(&p.base, p.slice_bytes * p.slices));
  refill(p, dtype, sigma, seed);
  return p;
}
void refill(Pool& p, int dtype, float sigma, uint64_t seed) {
  const size_t es = dtype == 0 ? 4 : 2;
  const size_t n = p.slice_bytes * p.slices / es;
  fill_kernel<<<1024, 256>>>(p.base, n, dtype, sigma, seed);
  BENCH_CHECK(cudaGetLastError());
  BENCH_CHECK(cudaDeviceSynchronize());
}
void free_pool(Pool& p) {
  cudaFree(p.base);
  p.base = nullptr;
}

double time_us(const std::function<void(int)>& fn, int reps, int warm) {
  if (g_quick) reps = std::min(reps, 7), warm = 1;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < warm; ++i) fn(i);
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0);
    fn(warm + i);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1000.f);
  }
  BENCH_CHECK(cudaGetLastError());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double time_graph_us(const std::function<void(int, cudaStream_t)>& fn, int slices, int reps, int warm) {
  if (g_quick) reps = std::min(reps, 7), warm = 1;
  cudaStream_t st;
  BENCH_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const int n = std::max(1, std::min(slices, 64));
  std::vector<cudaGraphExec_t> ex(n);
  for (int i = 0; i < n; ++i) ex[i] = capture_graph(st, [&] { fn(i, st); });
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < warm; ++i) BENCH_CHECK(cudaGraphLaunch(ex[i % n], st));
  BENCH_CHECK(cudaStreamSynchronize(st));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0, st);
    cudaGraphLaunch(ex[(warm + i) % n], st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1000.f);
  }
  BENCH_CHECK(cudaGetLastError());
  for (auto& x : ex) cudaGraphExecDestroy(x);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(st);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double floor_read_us(const Pool& a, const Pool* b, size_t bytes) {
  if (!g_sink) BENCH_CHECK(cudaMalloc(&g_sink, 256));
  const size_t n16 = bytes / 16;
  return time_graph_us(
      [&](int i, cudaStream_t st) {
        read_kernel<<<grid_for(n16), 256, 0, st>>>((const uint4*)a.slice(i),
                                                   b ? (const uint4*)b->slice(i) : nullptr, n16, g_sink);
      },
      a.slices);
}
double floor_read_write_us(const Pool& a, size_t bytes, size_t write_bytes) {
  if (g_out_bytes < write_bytes) {
    if (g_out_pool) cudaFree(g_out_pool);
    BENCH_CHECK(cudaMalloc(&g_out_pool, write_bytes));
    g_out_bytes = write_bytes;
  }
  const size_t n16 = bytes / 16, o16 = write_bytes / 16;
  return time_graph_us(
      [&](int i, cudaStream_t st) {
        read_write_kernel<<<grid_for(n16), 256, 0, st>>>((const uint4*)a.slice(i), n16, (uint4*)g_out_pool, o16);
      },
      a.slices);
}

void print_header() {
  std::printf("%-14s %-5s %7s %5s %9s %10s %10s %7s  %s\n", "scenario", "dtype", "V", "rows", "MB",
              "floor_us", "dds_us", "ratio", "note");
  std::fflush(stdout);
}
void print_row(const Row& r) {
  std::printf("%-14s %-5s %7d %5d %9.1f %10.1f %10.1f %7.2f  %s\n", r.scenario.c_str(), r.dtype.c_str(),
              r.V, r.rows, r.mb, r.floor_us, r.dds_us, r.dds_us / r.floor_us, r.note.c_str());
  std::fflush(stdout);
}

}  // namespace bench

using namespace bench;

namespace {

struct Scen {
  const char* name;
  float sigma;
  int32_t k;
  float p, minp;
  bool guided, mix, probs;
};

// Outputs of one dds_sample call (device).
struct Outs {
  int32_t *tokens = nullptr, *argmax = nullptr;
  float *logprobs = nullptr, *conf = nullptr, *margin = nullptr, *entropy = nullptr;
  void* probs = nullptr;
  int32_t *d_ks = nullptr;
  float *d_ps = nullptr, *d_mps = nullptr;
};

void run_sample_bench() {
  const int Vs[] = {1025, 32000, 151936, 262144};
  const int rowss[] = {8, 256, 4096};
  const Scen scens[] = {{"plain", 2.f, 0, 1.f, 0.f, false, false, false},
                        {"guided", 2.f, 0, 1.f, 0.f, true, false, false},
                        {"top-k50", 2.f, 50, 1.f, 0.f, false, false, false},
                        {"top-p0.9 s2", 2.f, 0, 0.9f, 0.f, false, false, false},
                        {"top-p0.9 s4", 4.f, 0, 0.9f, 0.f, false, false, false},
                        {"top-p0.9 s8", 8.f, 0, 0.9f, 0.f, false, false, false},
                        {"top-k50 s8", 8.f, 50, 1.f, 0.f, false, false, false},
                        {"min-p0.05 s8", 8.f, 0, 1.f, 0.05f, false, false, false},
                        {"min-p0.05", 2.f, 0, 1.f, 0.05f, false, false, false},
                        {"mix", 4.f, 0, 1.f, 0.f, false, true, false},
                        {"probs-bf16", 2.f, 0, 1.f, 0.f, false, false, true}};
  print_header();
  for (int dt : {0, 1}) {
    const char* dname = dt == 0 ? "f32" : "bf16";
    const size_t es = dt == 0 ? 4 : 2;
    for (int V : Vs) {
      for (int rows : rowss) {
        if (g_quick && rows == 256) continue;
        const size_t bytes = (size_t)rows * V * es;
        const double mb = bytes / 1e6;
        dds_sampler* s = make_cuda_sampler(V, rows);
        if (!s) std::exit(1);
        Outs o;
        BENCH_CHECK(cudaMalloc(&o.tokens, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.argmax, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.logprobs, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.conf, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.margin, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.entropy, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.probs, (size_t)rows * V * 2));
        // mix: request r % 4 = plain, top-k 50, top-p 0.9, min-p 0.05
        std::vector<int32_t> ks(rows, 0);
        std::vector<float> ps(rows, 1.f), mps(rows, 0.f);
        for (int r = 0; r < rows; ++r) {
          if (r % 4 == 1) ks[r] = 50;
          if (r % 4 == 2) ps[r] = 0.9f;
          if (r % 4 == 3) mps[r] = 0.05f;
        }
        BENCH_CHECK(cudaMalloc(&o.d_ks, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.d_ps, rows * 4));
        BENCH_CHECK(cudaMalloc(&o.d_mps, rows * 4));
        cudaMemcpy(o.d_ks, ks.data(), rows * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(o.d_ps, ps.data(), rows * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(o.d_mps, mps.data(), rows * 4, cudaMemcpyHostToDevice);
        Pool cond = make_pool(bytes, dt, 2.f, 1234 + V + rows);
        Pool unc;
        float cur_sigma = 2.f;
        std::map<int, double> floors;  // 0 read, 1 read both, 2 read + write bf16
        for (const Scen& sc : scens) {
          if (sc.sigma != cur_sigma) {
            refill(cond, dt, sc.sigma, 99 + (uint64_t)(sc.sigma * 10) + V);
            cur_sigma = sc.sigma;
          }
          if (sc.guided && !unc.base) unc = make_pool(bytes, dt, 2.f, 777 + V);
          const int fk = sc.guided ? 1 : sc.probs ? 2 : 0;
          if (!floors.count(fk)) {
            if (fk == 0) floors[0] = floor_read_us(cond, nullptr, bytes);
            else if (fk == 1) floors[1] = floor_read_us(cond, &unc, bytes);
            else floors[2] = floor_read_write_us(cond, bytes, (size_t)rows * V * 2);
          }
          auto call = [&](int i, void* probs_out, int probs_dt, cudaStream_t st) {
            dds_sample_args a;
            dds_sample_args_init(&a, sizeof a);
            a.num_rows = rows;
            a.num_requests = rows;
            a.logits = cond.slice(i);
            a.dtype = dt;
            a.seed = 42;
            a.step = (uint32_t)i;
            if (sc.guided) {
              a.uncond_logits = unc.slice(i);
              a.uncond_num_rows = rows;
              a.guidance_scale = 1.5f;
            }
            if (sc.mix) {
              a.top_ks = o.d_ks;
              a.top_ps = o.d_ps;
              a.min_ps = o.d_mps;
            } else {
              a.top_k = sc.k;
              a.top_p = sc.p;
              a.min_p = sc.minp;
            }
            a.tokens = o.tokens;
            a.argmax = o.argmax;
            a.logprobs = o.logprobs;
            a.confidence = o.conf;
            a.margin = o.margin;
            a.entropy = o.entropy;
            if (probs_out) {
              a.probs = probs_out;
              a.probs_dtype = probs_dt;
            }
            BENCH_DDS(dds_sample(s, &a, st));
          };
          // One untimed call to gauge the cost; few reps for very slow paths.
          cudaEvent_t e0, e1;
          cudaEventCreate(&e0);
          cudaEventCreate(&e1);
          cudaEventRecord(e0);
          call(0, sc.probs ? o.probs : nullptr, DDS_DTYPE_BF16, nullptr);
          cudaEventRecord(e1);
          BENCH_CHECK(cudaEventSynchronize(e1));
          float ms = 0;
          cudaEventElapsedTime(&ms, e0, e1);
          cudaEventDestroy(e0);
          cudaEventDestroy(e1);
          const int reps = ms > 20.f ? 5 : 25;
          const double us = time_graph_us(
              [&](int i, cudaStream_t st) { call(i, sc.probs ? o.probs : nullptr, DDS_DTYPE_BF16, st); },
              cond.slices, reps, ms > 20.f ? 1 : 3);
          std::string note;
          if (sc.p < 1.f || sc.minp > 0.f || sc.k > 0) {
            // Mean kept count over the first rows: probs (f32) of one call, count nonzero.
            const int nr = std::min(rows, 8);
            float* pf = nullptr;
            BENCH_CHECK(cudaMalloc(&pf, (size_t)rows * V * 4));
            call(1, pf, DDS_DTYPE_F32, nullptr);
            std::vector<float> h((size_t)nr * V);
            BENCH_CHECK(cudaMemcpy(h.data(), pf, h.size() * 4, cudaMemcpyDeviceToHost));
            cudaFree(pf);
            size_t kept = 0;
            for (float v : h) kept += v > 0.f;
            char buf[64];
            std::snprintf(buf, sizeof buf, "kept %.1f", (double)kept / nr);
            note = buf;
          }
          if (reps < 25) note += note.empty() ? "5 reps" : ", 5 reps";
          Row r{sc.name, dname, V, rows, fk == 1 ? 2 * mb : fk == 2 ? mb + rows * (double)V * 2 / 1e6 : mb,
                floors[fk], us, note};
          print_row(r);
        }
        free_pool(cond);
        if (unc.base) free_pool(unc);
        cudaFree(o.tokens);
        cudaFree(o.argmax);
        cudaFree(o.logprobs);
        cudaFree(o.conf);
        cudaFree(o.margin);
        cudaFree(o.entropy);
        cudaFree(o.probs);
        cudaFree(o.d_ks);
        cudaFree(o.d_ps);
        cudaFree(o.d_mps);
        dds_destroy(s);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) g_quick = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("dds_bench: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("dds_bench on %s (%d SMs), dds %s%s\n", prop.name, prop.multiProcessorCount,
              dds_version_string(), g_quick ? ", quick" : "");
  if (only.empty() || only == "sample") run_sample_bench();
  if (only.empty() || only == "stash") run_stash_bench();
  return 0;
}
