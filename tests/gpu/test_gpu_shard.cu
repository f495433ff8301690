// Vocabulary-parallel sampling on the CUDA backend, one GPU: R simulated ranks on column slices of
// one device logits buffer (slice = pointer offset, row_stride = V), cudaMemcpyAsync standing in
// for the all-gather. Tokens must equal the unsharded CPU dds_sample (near-ties counted, 0 here),
// statistics within 1e-5 relative; every rank's outputs identical; the whole sequence captured in
// a CUDA graph and replayed with new seeds.
#include "gpu_main.h"

#include <dds/dds_shard.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "dtype.h"

namespace {

constexpr float kInf = __builtin_huge_valf();

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { DDS_CUDA_CHECK(cudaMalloc(&p, sizeof(T) * (n ? n : 1))); }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) { put(h); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  std::vector<T> get() const {
    std::vector<T> h(n);
    if (n) DDS_CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
    return h;
  }
  void put(const std::vector<T>& h) {
    if (n) DDS_CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice));
  }
};

dds_sampler* make(int backend, int V, int rows) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = rows;
  c.max_requests = rows;
  dds_sampler* s = nullptr;
  const dds_status st = dds_create(&c, &s);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  return s;
}

struct Slice {
  int32_t off, len;
};

std::vector<Slice> make_slices(int32_t V, int32_t R, int mode, uint64_t seed) {
  std::vector<int32_t> cuts;
  if (mode == 0) {  // even, unaligned
    for (int32_t r = 1; r < R; ++r) cuts.push_back((int32_t)((int64_t)V * r / R));
  } else if (mode == 1) {  // block multiples where possible
    const int32_t nb = (V + 1023) / 1024;
    for (int32_t r = 1; r < R; ++r) {
      int32_t c = (int32_t)((int64_t)nb * r / R) * 1024;
      if (c <= (cuts.empty() ? 0 : cuts.back()) || c >= V) c = (int32_t)((int64_t)V * r / R);
      cuts.push_back(c);
    }
  } else {  // random, mostly narrower than a block
    std::mt19937_64 rng(seed);
    while ((int32_t)cuts.size() < R - 1) {
      const int32_t c = 1 + (int32_t)(rng() % (uint64_t)std::min(V - 1, 1500));
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
  }
  std::vector<Slice> s;
  int32_t prev = 0;
  for (int32_t c : cuts) {
    s.push_back({prev, c - prev});
    prev = c;
  }
  s.push_back({prev, V - prev});
  return s;
}

std::vector<float> make_logits(int32_t V, int32_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x((size_t)rows * V);
  for (int32_t r = 0; r < rows; ++r) {
    float* p = &x[(size_t)r * V];
    const int kind = r % 8;
    const float sigma = kind == 0 ? 1.f : kind == 1 ? 3.f : kind == 2 ? 8.f : 2.f;
    std::normal_distribution<float> nd(0.f, sigma);
    for (int32_t t = 0; t < V; ++t) p[t] = nd(rng);
    if (kind == 3)
      for (int32_t t = 0; t < V; ++t) p[t] = std::round(p[t] * 2.f) / 2.f;
    if (kind == 4)
      for (int32_t t = 0; t < V; ++t)
        if (rng() % 3 == 0) p[t] = -kInf;
    if (kind == 5)
      for (int32_t t = 0; t < V; ++t) p[t] = 0.5f;
    if (kind == 6) {
      for (int32_t t = 0; t < V; ++t) p[t] = -kInf;
      p[(r * 977) % V] = 1.f;
    }
    if (kind == 7 && r % 16 == 15)
      for (int32_t t = 0; t < V; ++t) p[t] = -kInf;
  }
  return x;
}

struct Out {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, confidence, margin, entropy;
  std::vector<float> probs;  // [rows, V] f32 when requested
};

struct DevOut {
  Dev<int32_t> tokens, argmax, status;
  Dev<float> logprobs, confidence, margin, entropy;
  DevOut(int rows, int reqs)
      : tokens(rows), argmax(rows), status(reqs), logprobs(rows), confidence(rows), margin(rows),
        entropy(rows) {}
  void attach(dds_sample_args* a) {
    a->tokens = tokens.p;
    a->argmax = argmax.p;
    a->request_status = status.p;
    a->logprobs = logprobs.p;
    a->confidence = confidence.p;
    a->margin = margin.p;
    a->entropy = entropy.p;
  }
  Out get() const {
    return {tokens.get(), argmax.get(), status.get(), logprobs.get(), confidence.get(),
            margin.get(), entropy.get()};
  }
};

Out run_cpu(int V, dds_sample_args a, bool with_probs = false) {  // a: host pointers
  dds_sampler* s = make(DDS_BACKEND_CPU, V, a.num_rows);
  Out o{std::vector<int32_t>(a.num_rows), std::vector<int32_t>(a.num_rows),
        std::vector<int32_t>(a.num_requests), std::vector<float>(a.num_rows),
        std::vector<float>(a.num_rows), std::vector<float>(a.num_rows),
        std::vector<float>(a.num_rows)};
  a.tokens = o.tokens.data();
  a.argmax = o.argmax.data();
  a.request_status = o.status.data();
  a.logprobs = o.logprobs.data();
  a.confidence = o.confidence.data();
  a.margin = o.margin.data();
  a.entropy = o.entropy.data();
  if (with_probs) {
    o.probs.assign((size_t)a.num_rows * V, -1.f);
    a.probs = o.probs.data();
    a.probs_dtype = DDS_DTYPE_F32;
    a.probs_row_stride = V;
  }
  const dds_status st = dds_sample(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  dds_destroy(s);
  return o;
}

bool close(float x, float y) {
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs((double)x - (double)y) <= 1e-5 * std::fabs((double)y) + 1e-6;
}

int compare(const Out& g, const Out& c) {
  int diff = 0;
  for (size_t r = 0; r < c.tokens.size(); ++r) {
    diff += g.tokens[r] != c.tokens[r];
    CHECK(g.argmax[r] == c.argmax[r]);
    if (g.tokens[r] != c.tokens[r]) continue;
    INFO("row " << r);
    CHECK(close(g.logprobs[r], c.logprobs[r]));
    CHECK(close(g.confidence[r], c.confidence[r]));
    CHECK(close(g.margin[r], c.margin[r]));
    CHECK(close(g.entropy[r], c.entropy[r]));
  }
  CHECK(g.status == c.status);
  if (!c.probs.empty()) {  // rows with equal tokens: every probability within tolerance
    const size_t V = c.probs.size() / c.tokens.size();
    int bad = 0;
    for (size_t r = 0; r < c.tokens.size(); ++r) {
      if (g.tokens[r] != c.tokens[r]) continue;
      for (size_t t = 0; t < V; ++t)
        if (!close(g.probs[r * V + t], c.probs[r * V + t])) ++bad;
    }
    INFO("probs outside tolerance: " << bad);
    CHECK(bad == 0);
  }
  return diff;
}

// The whole protocol on one GPU. `a` holds device pointers to the full [rows, V] logits (and
// uncond); rank i gets slices[i] as a pointer offset with row_stride V. capture: record the
// sequence in a CUDA graph, launch it `replays` times (after `before_replay`), else run it once.
template <typename BeforeReplay>
std::vector<Out> run_gpu(int V, const dds_sample_args& a, const std::vector<Slice>& slices,
                         int max_top_k, bool capture, BeforeReplay before_replay,
                         bool with_probs = false) {
  const int R = (int)slices.size(), rows = a.num_rows;
  const size_t esz = a.dtype == DDS_DTYPE_F32 ? 4 : 2;
  dds_sampler* s = make(DDS_BACKEND_CUDA, V, rows);
  std::vector<dds_sample_args> args(R, a);
  std::vector<dds_shard_args> sh(R);
  std::vector<DevOut*> outs;
  Dev<float> probs(with_probs ? (size_t)rows * V : 0);
  for (int i = 0; i < R; ++i) {
    if (with_probs) {  // every rank writes its slice of the same [rows, V] buffer
      args[i].probs = probs.p + slices[i].off;
      args[i].probs_dtype = DDS_DTYPE_F32;
      args[i].probs_row_stride = V;
    }
    args[i].logits = static_cast<const char*>(a.logits) + esz * slices[i].off;
    args[i].row_stride = V;
    if (a.uncond_logits) {
      args[i].uncond_logits = static_cast<const char*>(a.uncond_logits) + esz * slices[i].off;
      args[i].uncond_row_stride = V;
    }
    REQUIRE(dds_shard_args_init(&sh[i], sizeof sh[i]) == DDS_OK);
    sh[i].rank = i;
    sh[i].world_size = R;
    sh[i].vocab_offset = slices[i].off;
    sh[i].vocab_slice = slices[i].len;
    sh[i].max_top_k = max_top_k;
    outs.push_back(new DevOut(rows, a.num_requests));
    outs.back()->attach(&args[i]);
  }
  dds_shard_plan plan;
  plan.struct_size = sizeof plan;
  REQUIRE(dds_sample_shard_plan(s, &args[0], &sh[0], &plan) == DDS_OK);
  int64_t max_rec = 8;
  for (int q = 0; q < plan.num_rounds; ++q) max_rec = std::max(max_rec, plan.record_bytes[q]);
  Dev<unsigned char> gathered((size_t)plan.gathered_bytes);
  std::vector<Dev<unsigned char>*> recs;
  for (int i = 0; i < R; ++i) recs.push_back(new Dev<unsigned char>((size_t)max_rec));
  cudaStream_t stream;
  DDS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto sequence = [&]() {
    for (int q = 0; q < plan.num_rounds; ++q) {
      for (int i = 0; i < R; ++i) {
        sh[i].round = q;
        const dds_status st =
            dds_sample_partial(s, &args[i], &sh[i], gathered.p, recs[i]->p, (dds_stream)stream);
        INFO(dds_last_error());
        REQUIRE(st == DDS_OK);
      }
      for (int i = 0; i < R; ++i)
        DDS_CUDA_CHECK(cudaMemcpyAsync(gathered.p + plan.gathered_offset[q] + i * plan.record_bytes[q],
                                       recs[i]->p, (size_t)plan.record_bytes[q],
                                       cudaMemcpyDeviceToDevice, stream));
    }
    for (int i = 0; i < R; ++i) {
      const dds_status st = dds_sample_finish(s, &args[i], &sh[i], gathered.p, (dds_stream)stream);
      INFO(dds_last_error());
      REQUIRE(st == DDS_OK);
    }
  };
  if (capture) {
    const CapturedGraph graph(stream, sequence);
    before_replay();
    graph.launch();
    DDS_CUDA_CHECK(cudaStreamSynchronize(stream));
  } else {
    sequence();
  }
  DDS_CUDA_CHECK(cudaStreamSynchronize(stream));
  DDS_CUDA_CHECK(cudaGetLastError());
  std::vector<Out> res;
  for (int i = 0; i < R; ++i) res.push_back(outs[i]->get());
  if (with_probs) res[0].probs = probs.get();
  for (int i = 1; i < R; ++i) {
    CHECK(res[i].tokens == res[0].tokens);
    CHECK(res[i].status == res[0].status);
    CHECK(std::memcmp(res[i].logprobs.data(), res[0].logprobs.data(), 4 * rows) == 0);
    CHECK(std::memcmp(res[i].entropy.data(), res[0].entropy.data(), 4 * rows) == 0);
  }
  for (auto* p : recs) delete p;
  for (auto* p : outs) delete p;
  cudaStreamDestroy(stream);
  dds_destroy(s);
  return res;
}

struct Config {
  const char* name;
  float T;
  int32_t k;
  float p, min_p;
  bool guided;
  int32_t stats;
};

const Config kConfigs[] = {
    {"plain", 1.f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"temp", 0.7f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"greedy", 0.f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-k 50", 1.f, 50, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0.9", 1.f, 0, 0.9f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0.999", 1.f, 0, 0.999f, 0.f, false, DDS_STATS_PROCESSED},
    {"min-p 0.05", 1.f, 0, 1.f, 0.05f, false, DDS_STATS_PROCESSED},
    {"top-k+top-p+min-p", 0.8f, 60, 0.95f, 0.02f, false, DDS_STATS_PROCESSED},
    {"guided top-p", 1.f, 0, 0.9f, 0.f, true, DDS_STATS_PROCESSED},
    {"guided stats", 0.9f, 20, 1.f, 0.f, true, DDS_STATS_GUIDED},
};

int run_case(int V, int rows, int R, int mode, const Config& cfg, int dtype, bool capture,
             uint64_t seed, bool with_probs = false) {
  std::vector<float> lf = make_logits(V, rows, seed), uf = make_logits(V, rows, seed + 1);
  for (float& u : uf)
    if (u == -kInf) u = 0.f;
  std::vector<uint16_t> lb(lf.size()), ub(uf.size());
  for (size_t e = 0; e < lf.size(); ++e) {
    lb[e] = dds::f32_to_bf16(lf[e]);
    ub[e] = dds::f32_to_bf16(uf[e]);
  }
  const bool bf = dtype == DDS_DTYPE_BF16;
  std::vector<uint64_t> seeds(rows);
  for (int r = 0; r < rows; ++r) seeds[r] = 1000 + seed * 131 + r;
  dds_sample_args a;
  REQUIRE(dds_sample_args_init(&a, sizeof a) == DDS_OK);
  a.num_rows = rows;
  a.num_requests = rows;
  a.dtype = dtype;
  a.temperature = cfg.T;
  a.top_k = cfg.k;
  a.top_p = cfg.p;
  a.min_p = cfg.min_p;
  a.step = 3;
  a.stats = cfg.stats;
  a.banned_token = V / 3;
  if (cfg.guided) {
    a.uncond_num_rows = rows;
    a.guidance_scale = 1.5f;
  }
  // Device copies.
  Dev<float> dlf(lf), duf(uf);
  Dev<uint16_t> dlb(lb), dub(ub);
  Dev<uint64_t> dseeds(seeds);
  dds_sample_args ga = a;
  ga.logits = bf ? (const void*)dlb.p : (const void*)dlf.p;
  if (cfg.guided) ga.uncond_logits = bf ? (const void*)dub.p : (const void*)duf.p;
  ga.seeds = dseeds.p;
  std::vector<uint64_t> seeds2 = seeds;
  for (auto& x : seeds2) x += 77;
  auto replay = [&]() {
    if (capture) dseeds.put(seeds2);  // the graph reads the seeds array at replay
  };
  std::vector<Out> g = run_gpu(V, ga, make_slices(V, R, mode, seed), 64, capture, replay, with_probs);
  dds_sample_args ca = a;
  ca.logits = bf ? (const void*)lb.data() : (const void*)lf.data();
  if (cfg.guided) ca.uncond_logits = bf ? (const void*)ub.data() : (const void*)uf.data();
  ca.seeds = capture ? seeds2.data() : seeds.data();
  Out c = run_cpu(V, ca, with_probs);
  INFO("V " << V << " R " << R << " mode " << mode << " " << cfg.name << " bf16 " << bf
            << " capture " << capture);
  return compare(g[0], c);
}

}  // namespace

TEST_CASE("gpu shard: R = 1, 2, 3, 4, 8, slices even / aligned / tiny, filters, guidance") {
  int diff = 0;
  uint64_t seed = 1;
  for (int R : {1, 2, 3, 4, 8})
    for (int mode = 0; mode < 3; ++mode) {
      if (R == 1 && mode) continue;
      for (const Config& cfg : kConfigs) {
        const int V = (seed % 2) ? 3001 : 4096;
        diff += run_case(V, 16, R, mode, cfg, seed % 3 == 0 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32,
                         false, seed);
        ++seed;
      }
    }
  MESSAGE("near-tie token differences: " << diff);
  CHECK(diff == 0);
}

TEST_CASE("gpu shard: 151936 / 8 = 18992 per rank, bf16") {
  int diff = 0;
  diff += run_case(151936, 8, 8, 0, kConfigs[0], DDS_DTYPE_BF16, false, 91);
  diff += run_case(151936, 8, 8, 0, kConfigs[4], DDS_DTYPE_BF16, false, 92);
  diff += run_case(151936, 8, 8, 0, kConfigs[7], DDS_DTYPE_BF16, false, 93);
  CHECK(diff == 0);
}

TEST_CASE("gpu shard: probs (each rank its slice of one buffer), every filter, guidance") {
  int diff = 0;
  uint64_t seed = 301;
  for (int R : {1, 3, 8})
    for (const Config& cfg : kConfigs) {
      diff += run_case(R == 8 ? 4096 : 3001, 16, R, R == 8 ? 2 : 0, cfg,
                       seed % 2 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32, false, seed, true);
      ++seed;
    }
  MESSAGE("near-tie token differences: " << diff);
  CHECK(diff == 0);
}

// The benchmark's shapes at test scale: V = 262144 split over R = 8 (block-aligned slices of
// 32768), R = 5 and R = 3 (unaligned), 256 rows; 4096 rows of V = 20000 over R = 4 (unaligned).
TEST_CASE("gpu shard: large vocabularies and many rows, aligned and unaligned slices") {
  int diff = 0;
  diff += run_case(262144, 256, 8, 0, kConfigs[0], DDS_DTYPE_BF16, false, 401);
  diff += run_case(262144, 256, 8, 0, kConfigs[4], DDS_DTYPE_BF16, false, 402);
  diff += run_case(262144, 256, 5, 0, kConfigs[3], DDS_DTYPE_BF16, false, 403);
  diff += run_case(262144, 256, 5, 0, kConfigs[7], DDS_DTYPE_BF16, false, 404);
  diff += run_case(262144, 256, 3, 0, kConfigs[6], DDS_DTYPE_F32, false, 405);
  diff += run_case(262144, 256, 3, 0, kConfigs[8], DDS_DTYPE_BF16, false, 406);
  diff += run_case(20000, 4096, 4, 0, kConfigs[0], DDS_DTYPE_BF16, false, 407);
  diff += run_case(20000, 4096, 4, 0, kConfigs[5], DDS_DTYPE_BF16, false, 408);
  diff += run_case(20000, 4096, 4, 0, kConfigs[9], DDS_DTYPE_F32, false, 409);
  MESSAGE("near-tie token differences: " << diff);
  CHECK(diff <= 2);
}

TEST_CASE("gpu shard: the whole sequence captured in a CUDA graph, replayed with new seeds") {
  int diff = 0;
  diff += run_case(3001, 16, 4, 2, kConfigs[0], DDS_DTYPE_F32, true, 201);
  diff += run_case(3001, 16, 3, 0, kConfigs[5], DDS_DTYPE_BF16, true, 202);
  diff += run_case(4096, 16, 8, 2, kConfigs[7], DDS_DTYPE_F32, true, 203);
  CHECK(diff == 0);
}

TEST_CASE("gpu shard: host pointers are refused") {
  const int V = 100;
  dds_sampler* s = make(DDS_BACKEND_CUDA, V, 4);
  std::vector<float> lg(V);
  int32_t tok = 0;
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = 1;
  a.logits = lg.data();
  a.tokens = &tok;
  dds_shard_args sh;
  dds_shard_args_init(&sh, sizeof sh);
  sh.vocab_slice = V;
  Dev<unsigned char> rec(4096);
  CHECK(dds_sample_partial(s, &a, &sh, nullptr, rec.p, nullptr) != DDS_OK);
  dds_destroy(s);
}
