// Vocabulary-parallel sampling over NCCL (libdds_nccl, dds_sample_nccl) on every visible GPU (at
// least 2, else skipped with 77): one thread per GPU drives its rank (its own CUDA sampler, its
// column slice, its communicator rank). Tokens must equal the unsharded CPU dds_sample (near-ties
// counted, 0 expected), statistics within 1e-5 relative, every rank's outputs identical.
// Label `multigpu`; run: ctest -L multigpu, or the executable directly (DDS_NCCL_RANKS=N limits
// the number of GPUs used).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <dds/dds_nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "dtype.h"

namespace {

constexpr float kInf = __builtin_huge_valf();
int g_ranks = 0;

struct Out {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, entropy, margin, confidence;
  dds_status st = DDS_OK;
  std::string error;
};

struct Config {
  const char* name;
  float T;
  int32_t k;
  float p, min_p;
  bool guided;
};

std::vector<float> make_logits(int V, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x((size_t)rows * V);
  for (int r = 0; r < rows; ++r) {
    std::normal_distribution<float> nd(0.f, r % 3 == 0 ? 1.f : r % 3 == 1 ? 3.f : 8.f);
    for (int t = 0; t < V; ++t) x[(size_t)r * V + t] = nd(rng);
    if (r % 5 == 4)
      for (int t = 0; t < V; ++t)
        if (rng() % 4 == 0) x[(size_t)r * V + t] = -kInf;
  }
  return x;
}

// Rank `rank` of `R`: columns [off, off + len) of the bf16 rows `lb` (and uncond `ub`).
void rank_main(int rank, int R, ncclUniqueId id, int V, int rows, const Config& cfg,
               const std::vector<uint16_t>& lb, const std::vector<uint16_t>& ub, Out* out) {
  auto bad = [&](dds_status st, const char* where) {
    out->st = st;
    out->error = std::string(where) + ": " + dds_last_error() + " " + dds_nccl_last_error();
  };
  cudaSetDevice(rank);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, R, id, rank) != ncclSuccess) {
    out->st = DDS_ERR_CUDA;
    out->error = "ncclCommInitRank failed";
    return;
  }
  const int off = (int)((int64_t)V * rank / R), len = (int)((int64_t)V * (rank + 1) / R) - off;
  std::vector<uint16_t> sl((size_t)rows * len), su((size_t)rows * len);
  for (int i = 0; i < rows; ++i)
    for (int t = 0; t < len; ++t) {
      sl[(size_t)i * len + t] = lb[(size_t)i * V + off + t];
      su[(size_t)i * len + t] = ub[(size_t)i * V + off + t];
    }
  void *dl, *du, *dout, *ws;
  cudaMalloc(&dl, sl.size() * 2);
  cudaMalloc(&du, su.size() * 2);
  cudaMalloc(&dout, (size_t)rows * 4 * 6 + 4 * rows);
  cudaMemcpy(dl, sl.data(), sl.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(du, su.data(), su.size() * 2, cudaMemcpyHostToDevice);
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CUDA;
  c.device = rank;
  c.vocab_size = V;
  c.max_rows = rows;
  c.max_requests = rows;
  dds_sampler* s = nullptr;
  dds_status st = dds_create(&c, &s);
  if (st != DDS_OK) return bad(st, "dds_create");
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = rows;
  a.logits = dl;
  a.dtype = DDS_DTYPE_BF16;
  a.temperature = cfg.T;
  a.top_k = cfg.k;
  a.top_p = cfg.p;
  a.min_p = cfg.min_p;
  a.seed = 42;
  a.step = 5;
  if (cfg.guided) {
    a.uncond_logits = du;
    a.uncond_num_rows = rows;
    a.guidance_scale = 1.5f;
  }
  int32_t* o32 = static_cast<int32_t*>(dout);
  a.tokens = o32;
  a.argmax = o32 + rows;
  a.logprobs = reinterpret_cast<float*>(o32 + 2 * rows);
  a.entropy = reinterpret_cast<float*>(o32 + 3 * rows);
  a.margin = reinterpret_cast<float*>(o32 + 4 * rows);
  a.confidence = reinterpret_cast<float*>(o32 + 5 * rows);
  a.request_status = o32 + 6 * rows;
  dds_shard_args sh;
  dds_shard_args_init(&sh, sizeof sh);
  sh.rank = rank;
  sh.world_size = R;
  sh.vocab_offset = off;
  sh.vocab_slice = len;
  size_t wsb = 0;
  if ((st = dds_sample_nccl_workspace_bytes(s, &a, &sh, &wsb)) != DDS_OK) return bad(st, "workspace");
  cudaMalloc(&ws, wsb);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  st = dds_sample_nccl(s, &a, &sh, comm, ws, wsb, (dds_stream)stream);
  if (st != DDS_OK) return bad(st, "dds_sample_nccl");
  cudaStreamSynchronize(stream);
  std::vector<int32_t> h((size_t)rows * 7);
  cudaMemcpy(h.data(), dout, h.size() * 4, cudaMemcpyDeviceToHost);
  auto f = [&](int k) {
    std::vector<float> v(rows);
    std::memcpy(v.data(), h.data() + (size_t)k * rows, 4 * rows);
    return v;
  };
  out->tokens.assign(h.begin(), h.begin() + rows);
  out->argmax.assign(h.begin() + rows, h.begin() + 2 * rows);
  out->logprobs = f(2);
  out->entropy = f(3);
  out->margin = f(4);
  out->confidence = f(5);
  out->status.assign(h.begin() + 6 * rows, h.begin() + 7 * rows);
  if (cudaGetLastError() != cudaSuccess) out->st = DDS_ERR_CUDA;
  cudaStreamDestroy(stream);
  cudaFree(ws);
  cudaFree(dl);
  cudaFree(du);
  cudaFree(dout);
  dds_destroy(s);
  ncclCommDestroy(comm);
}

Out run_cpu(int V, int rows, const Config& cfg, const std::vector<uint16_t>& lb,
            const std::vector<uint16_t>& ub) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.vocab_size = V;
  c.max_rows = rows;
  c.max_requests = rows;
  dds_sampler* s = nullptr;
  REQUIRE(dds_create(&c, &s) == DDS_OK);
  Out o;
  o.tokens.resize(rows);
  o.argmax.resize(rows);
  o.status.resize(rows);
  o.logprobs.resize(rows);
  o.entropy.resize(rows);
  o.margin.resize(rows);
  o.confidence.resize(rows);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = rows;
  a.logits = lb.data();
  a.dtype = DDS_DTYPE_BF16;
  a.temperature = cfg.T;
  a.top_k = cfg.k;
  a.top_p = cfg.p;
  a.min_p = cfg.min_p;
  a.seed = 42;
  a.step = 5;
  if (cfg.guided) {
    a.uncond_logits = ub.data();
    a.uncond_num_rows = rows;
    a.guidance_scale = 1.5f;
  }
  a.tokens = o.tokens.data();
  a.argmax = o.argmax.data();
  a.request_status = o.status.data();
  a.logprobs = o.logprobs.data();
  a.entropy = o.entropy.data();
  a.margin = o.margin.data();
  a.confidence = o.confidence.data();
  REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
  dds_destroy(s);
  return o;
}

bool close(float x, float y) {
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs((double)x - (double)y) <= 1e-5 * std::fabs((double)y) + 1e-6;
}

void run(int V, int rows, const Config& cfg) {
  const int R = g_ranks;
  std::vector<float> lf = make_logits(V, rows, 7), uf = make_logits(V, rows, 8);
  std::vector<uint16_t> lb(lf.size()), ub(uf.size());
  for (size_t e = 0; e < lf.size(); ++e) {
    lb[e] = dds::f32_to_bf16(lf[e]);
    ub[e] = dds::f32_to_bf16(uf[e] == -kInf ? 0.f : uf[e]);
  }
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<Out> outs(R);
  std::vector<std::thread> th;
  for (int r = 0; r < R; ++r)
    th.emplace_back(rank_main, r, R, id, V, rows, std::cref(cfg), std::cref(lb), std::cref(ub),
                    &outs[r]);
  for (auto& t : th) t.join();
  for (int r = 0; r < R; ++r) {
    INFO("rank " << r << ": " << outs[r].error);
    REQUIRE(outs[r].st == DDS_OK);
  }
  for (int r = 1; r < R; ++r) {
    CHECK(outs[r].tokens == outs[0].tokens);
    CHECK(std::memcmp(outs[r].logprobs.data(), outs[0].logprobs.data(), 4 * rows) == 0);
  }
  const Out c = run_cpu(V, rows, cfg, lb, ub);
  int diff = 0;
  for (int i = 0; i < rows; ++i) {
    diff += outs[0].tokens[i] != c.tokens[i];
    CHECK(outs[0].argmax[i] == c.argmax[i]);
    if (outs[0].tokens[i] != c.tokens[i]) continue;
    INFO("row " << i);
    CHECK(close(outs[0].logprobs[i], c.logprobs[i]));
    CHECK(close(outs[0].entropy[i], c.entropy[i]));
    CHECK(close(outs[0].margin[i], c.margin[i]));
    CHECK(close(outs[0].confidence[i], c.confidence[i]));
  }
  CHECK(outs[0].status == c.status);
  MESSAGE(cfg.name << " V " << V << " R " << R << ": near-tie token differences " << diff);
  CHECK(diff == 0);
}

}  // namespace

TEST_CASE("nccl shard: tokens equal the unsharded CPU dds_sample") {
  const Config cfgs[] = {{"plain", 1.f, 0, 1.f, 0.f, false},
                         {"top-p 0.9", 1.f, 0, 0.9f, 0.f, false},
                         {"top-k+top-p+min-p guided", 0.8f, 50, 0.95f, 0.02f, true}};
  for (const Config& cfg : cfgs) {
    run(151936, 64, cfg);
    run(3001, 32, cfg);
  }
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
    std::printf("skipped: needs at least 2 CUDA devices (found %d)\n", n);
    return 77;
  }
  g_ranks = std::min(n, 8);
  if (const char* e = std::getenv("DDS_NCCL_RANKS")) g_ranks = std::max(2, std::min(g_ranks, std::atoi(e)));
  std::printf("nccl shard test on %d GPUs\n", g_ranks);
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
