// dds_profile_sample: calls dds_sample a few times on one shape, for a profiler (ncu / nsys) to
// pick one launch. Usage: dds_profile_sample [f32|bf16] [V] [rows] [plain|topk|topp|minp|guided|mix] [calls]
// [temperature]. Logits are sigma * N(0, 1), sigma = 2 (filled on the device): temperature 0.5 /
// 0.25 samples rows shaped like sigma 4 / 8 (top-p 0.9 keeps ~62000 of 262144 columns at T = 1). Prints the median call time
// (CUDA events; unreliable under a profiler, which serialises and replays kernels).
// --dump FILE: the last call's outputs written raw to FILE (for cmp across builds or plans);
// --plan SPEC: launch plan overrides (kernels/sample/plan.h, e.g. "small_plain=0,fuse=1"), set
// through the internal hook (src/testing.h; this program links the static dds_internal);
// --graph: one call captured into a CUDA graph, the graph launched `calls` times (the same step
// each time) instead of calls launched on the stream.
#include <dds/dds.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "profile_common.h"
#include "sample/plan.h"
#include "testing.h"

int main(int argc, char** argv) {
  // Trailing options after the positional arguments: --dump FILE, --plan SPEC.
  int npos = argc;
  const char* dump = nullptr;
  const char* plan = nullptr;
  bool graph = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--", 2) != 0) continue;
    if (npos == argc) npos = i;
    if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else if (!std::strcmp(argv[i], "--plan") && i + 1 < argc) plan = argv[++i];
    else if (!std::strcmp(argv[i], "--graph")) graph = true;
    else {
      std::printf("dds_profile_sample: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  argc = npos;
  const int bf16 = argc > 1 && !std::strcmp(argv[1], "bf16");
  const int V = argc > 2 ? std::atoi(argv[2]) : 262144, rows = argc > 3 ? std::atoi(argv[3]) : 4096;
  const char* scen = argc > 4 ? argv[4] : "plain";
  const int calls = argc > 5 ? std::atoi(argv[5]) : 5;
  const float temp = argc > 6 ? (float)std::atof(argv[6]) : 1.f;  // 0.5 / 0.25: sigma 4 / 8 rows
  const size_t n = (size_t)V * rows;
  void* logits;
  int32_t* out;
  if (cudaMalloc(&logits, n * (bf16 ? 2 : 4)) != cudaSuccess || cudaMalloc(&out, (size_t)rows * 24) != cudaSuccess) {
    std::printf("dds_profile_sample: no CUDA device or out of memory\n");
    return 1;
  }
  fill<<<2048, 256>>>(logits, n, bf16, 12345u);
  dds_sampler* s = make_cuda_sampler(V, rows);
  if (!s) return 1;
  if (plan) {
    dds::ksample::SamplePlanOverrides o;
    const char* err = nullptr;
    if (!dds::ksample::parse_plan_overrides(plan, &o, &err) ||
        dds::testing::set_sample_plan(s, o) != DDS_OK) {
      std::printf("dds_profile_sample: bad --plan at '%s'\n", err ? err : plan);
      return 2;
    }
  }
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = rows;
  a.logits = logits;
  a.dtype = bf16 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32;
  a.temperature = temp;
  if (!std::strcmp(scen, "topk")) a.top_k = 50;
  if (!std::strcmp(scen, "topp")) a.top_p = 0.9f;
  if (!std::strcmp(scen, "minp")) a.min_p = 0.05f;
  if (!std::strcmp(scen, "guided")) {  // every request guided, g = 2, uncond rows laid out as cond
    void* unc = nullptr;
    if (cudaMalloc(&unc, n * (bf16 ? 2 : 4)) != cudaSuccess) {
      std::printf("dds_profile_sample: out of memory\n");
      return 1;
    }
    fill<<<2048, 256>>>(unc, n, bf16, 777u);
    a.uncond_logits = unc;
    a.uncond_num_rows = rows;
    a.guidance_scale = 2.f;
  }
  if (!std::strcmp(scen, "mix")) {  // request r % 4: plain, top-k 50, top-p 0.9, min-p 0.05
    std::vector<int32_t> k(rows, 0);
    std::vector<float> p(rows, 1.f), mp(rows, 0.f);
    for (int r = 0; r < rows; ++r) {
      if (r % 4 == 1) k[r] = 50;
      if (r % 4 == 2) p[r] = 0.9f;
      if (r % 4 == 3) mp[r] = 0.05f;
    }
    int32_t* dk = nullptr;
    float *dp = nullptr, *dmp = nullptr;
    if (cudaMalloc(&dk, rows * 4) != cudaSuccess || cudaMalloc(&dp, rows * 4) != cudaSuccess ||
        cudaMalloc(&dmp, rows * 4) != cudaSuccess) {
      std::printf("dds_profile_sample: out of memory\n");
      return 1;
    }
    cudaMemcpy(dk, k.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dp, p.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dmp, mp.data(), rows * 4, cudaMemcpyHostToDevice);
    a.top_ks = dk;
    a.top_ps = dp;
    a.min_ps = dmp;
  }
  a.seed = 1;
  a.tokens = out;
  a.argmax = out + rows;
  a.logprobs = (float*)(out + 2 * rows);
  a.confidence = (float*)(out + 3 * rows);
  a.margin = (float*)(out + 4 * rows);
  a.entropy = (float*)(out + 5 * rows);
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaStream_t st;
    BENCH_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    dds_status cs = DDS_OK;
    exec = capture_graph(st, [&] { cs = dds_sample(s, &a, st); });
    if (cs != DDS_OK) {
      std::printf("dds_profile_sample: graph capture failed: %s\n", dds_last_error());
      return 1;
    }
  }
  const float med = median_call_us(calls, [&](int i) {
    if (exec) return cudaGraphLaunch(exec, nullptr) == cudaSuccess;
    a.step = i;
    if (dds_sample(s, &a, nullptr) == DDS_OK) return true;
    std::printf("dds_sample: %s\n", dds_last_error());
    return false;
  });
  if (med < 0.f) return 1;
  if (dump) {
    // The last call's outputs (tokens, argmax, logprob, confidence, margin, entropy), raw bytes:
    // two builds, or two launch plans, can be compared with cmp.
    std::vector<int32_t> h((size_t)rows * 6);
    cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost);
    if (FILE* f = std::fopen(dump, "wb")) {
      std::fwrite(h.data(), 4, h.size(), f);
      std::fclose(f);
    }
  }
  std::printf("dds_profile_sample %s V=%d rows=%d %s T=%g: median %.1f us over %d %s\n",
              bf16 ? "bf16" : "f32", V, rows, scen, temp, med, calls,
              exec ? "graph launches" : "calls");
  dds_destroy(s);
  return 0;
}
