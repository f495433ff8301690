// GPU tests of dds_sample (CUDA backend) against the CPU backend (the oracle, docs/sampling.md):
// parity sweep over vocab sizes, row counts, dtypes, strides, mixed per-request settings,
// guidance, banned token, -inf / NaN columns, positions, both stats modes, probs in f32/bf16/f16,
// request_status; statistical tests on the GPU (chi-square, rare tail); batch invariance; graph
// capture and replay with new per-request values. The problems, the runs and the comparison:
// sample_problem.h (shared with test_gpu_mask.cu).
#include "gpu_main.h"  // first: doctest implementation + main that skips without a device

#include <dds/dds.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu/test_util.h"
#include "dtype.h"
#include "sample/plan.h"
#include "testing.h"

#include "sample_problem.h"

namespace {

void parity(int32_t V, int32_t rows, int32_t dtype, uint64_t seed, int64_t pad, bool use_pos,
            int32_t stats, bool probs, int32_t probs_dtype) {
  char what[256];
  std::snprintf(what, sizeof what, "V=%d rows=%d dtype=%d pad=%lld pos=%d stats=%d probs=%d/%d", V,
                rows, dtype, (long long)pad, (int)use_pos, stats, (int)probs, probs_dtype);
  Problem pb = make_problem(V, rows, dtype, seed, pad, use_pos, stats, probs, probs_dtype);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  const Results rc = run(cpu, pb, false);
  const Results rg = run(gpu, pb, true);
  const int bad = compare(pb, rc, rg, what);
  const int allowed = allowed_rows(rows);  // near-ties only
  MESSAGE(what << ": " << bad << " differing rows (allowed " << allowed << ")");
  CHECK(bad <= allowed);
  // A second call on the same sampler must give identical results (counters reset, no state).
  const Results rg2 = run(gpu, pb, true);
  CHECK(rg2.tokens == rg.tokens);
  CHECK(std::memcmp(rg2.logprobs.data(), rg.logprobs.data(), rg.logprobs.size() * 4) == 0);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

void filter_parity(int32_t V, int32_t rows, int32_t dtype, uint64_t seed, int32_t stats,
                   bool probs) {
  char what[256];
  std::snprintf(what, sizeof what, "filters V=%d rows=%d dtype=%d stats=%d probs=%d", V, rows,
                dtype, stats, (int)probs);
  Problem pb = make_filter_problem(V, rows, dtype, seed, stats, probs);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  const Results rc = run(cpu, pb, false);
  const Results rg = run(gpu, pb, true);
  const int bad = compare(pb, rc, rg, what);
  const int allowed = allowed_rows(rows);
  MESSAGE(what << ": " << bad << " differing rows (allowed " << allowed << ")");
  CHECK(bad <= allowed);
  // Again on the same sampler (fallback list and counters reset), then a subset of the rows in
  // another order of requests: identical tokens (no state, batch invariance).
  const Results rg2 = run(gpu, pb, true);
  CHECK(rg2.tokens == rg.tokens);
  CHECK(std::memcmp(rg2.logprobs.data(), rg.logprobs.data(), rg.logprobs.size() * 4) == 0);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

}  // namespace

TEST_CASE("parity: small shapes (V = 1, 7, 1025; rows 1, 3, 257; every dtype)") {
  uint64_t seed = 1;
  for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    parity(1, 3, dt, seed++, 0, false, DDS_STATS_PROCESSED, true, dt);
    parity(7, 257, dt, seed++, 3, true, DDS_STATS_PROCESSED, true, (dt + 1) % 3);
    parity(7, 1, dt, seed++, 0, false, DDS_STATS_GUIDED, false, 0);
    parity(1025, 257, dt, seed++, dt == 0 ? 4 : 8, dt == 1, DDS_STATS_PROCESSED, true, dt);
    parity(1025, 3, dt, seed++, 1, true, DDS_STATS_GUIDED, true, (dt + 2) % 3);
  }
}

TEST_CASE("sanitizer: small mixed batches (both filter paths, every kernel)") {
  // Small enough for compute-sanitizer racecheck; V = 5000 takes the filter kernel's
  // candidate path (top-k) and its whole-row path (top-p / min-p), V = 1025 the all-candidates one.
  parity(1025, 40, DDS_DTYPE_BF16, 301, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F32);
  parity(5000, 40, DDS_DTYPE_F32, 302, 3, false, DDS_STATS_PROCESSED, true, DDS_DTYPE_BF16);
  parity(5000, 27, DDS_DTYPE_F16, 303, 0, true, DDS_STATS_GUIDED, true, DDS_DTYPE_F16);
  // 1024 rows of 17 blocks: two warps per row in the pass, the warp-per-row finish kernel (the
  // fused finish of such rows, through the per-row counters: the launch plans test below).
  parity(17000, 1024, DDS_DTYPE_BF16, 304, 0, false, DDS_STATS_PROCESSED, false, 0);
}

TEST_CASE("parity: 1024+ rows of many blocks (several pass warps per row, warp-per-row finish)") {
  parity(32001, 1536, DDS_DTYPE_BF16, 210, 0, true, DDS_STATS_PROCESSED, false, 0);
  parity(40000, 1024, DDS_DTYPE_F32, 211, 5, false, DDS_STATS_GUIDED, true, DDS_DTYPE_BF16);
  parity(151936, 1100, DDS_DTYPE_BF16, 212, 0, true, DDS_STATS_PROCESSED, false, 0);
}

TEST_CASE("parity: 4096 rows x 1025") {
  parity(1025, 4096, DDS_DTYPE_BF16, 101, 0, true, DDS_STATS_PROCESSED, false, 0);
  parity(1025, 4096, DDS_DTYPE_F32, 102, 0, false, DDS_STATS_GUIDED, true, DDS_DTYPE_BF16);
}

TEST_CASE("parity: large vocabularies (32001, 126464, 151936, 262144)") {
  parity(32001, 257, DDS_DTYPE_F32, 201, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F32);
  parity(32001, 64, DDS_DTYPE_BF16, 202, 7, false, DDS_STATS_GUIDED, false, 0);
  parity(32001, 64, DDS_DTYPE_F16, 203, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F16);
  parity(126464, 13, DDS_DTYPE_BF16, 204, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_BF16);
  parity(151936, 13, DDS_DTYPE_F32, 205, 16, false, DDS_STATS_PROCESSED, false, 0);
  parity(151936, 13, DDS_DTYPE_F16, 206, 0, true, DDS_STATS_GUIDED, true, DDS_DTYPE_F32);
  parity(262144, 13, DDS_DTYPE_F32, 207, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F32);
  parity(262144, 13, DDS_DTYPE_BF16, 208, 3, false, DDS_STATS_GUIDED, false, 0);
  parity(262144, 1, DDS_DTYPE_BF16, 209, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_BF16);
  MESSAGE("parity totals so far: " << g_tally.rows << " rows, " << g_tally.bad_rows
                                   << " differing rows (near-ties), " << g_tally.token_diff
                                   << " with a different token");
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("statistics: chi-square on the GPU (1e5 draws, V = 2100, plain and filtered)") {
  // One request of `chunk` rows: positions 0..chunk-1 key the draws, the step advances per call.
  const int32_t V = 2100, n = 102400, chunk = 4096;
  std::mt19937_64 rng(77);
  const std::vector<float> c = tu::random_row(rng, V, 2.f);
  struct Cfg {
    float T;
    int32_t k;
    float p, mp;
    const char* name;
  } cfgs[] = {{1.f, 0, 1.f, 0.f, "plain"},
              {0.8f, 200, 1.f, 0.f, "top-k 200"},
              {1.f, 0, 0.9f, 0.f, "top-p 0.9"},
              {1.2f, 0, 1.f, 0.05f, "min-p 0.05"},
              {1.f, 100, 0.8f, 0.01f, "top-k 100 + top-p 0.8 + min-p 0.01"}};
  dds_sampler* s = make_sampler(DDS_BACKEND_CUDA, V, chunk, 1);
  std::vector<float> rowsv((size_t)chunk * V);
  for (int32_t j = 0; j < chunk; ++j) std::copy(c.begin(), c.end(), rowsv.begin() + (size_t)j * V);
  float* d_l = nullptr;
  int32_t *d_tok = nullptr, *d_offs = nullptr;
  REQUIRE(cudaMalloc(&d_l, rowsv.size() * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_tok, chunk * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_offs, 8) == cudaSuccess);
  const int32_t offs_h[2] = {0, chunk};
  REQUIRE(cudaMemcpy(d_offs, offs_h, 8, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_l, rowsv.data(), rowsv.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<int32_t> tok(chunk);
  for (const Cfg& cf : cfgs) {
    std::vector<long long> counts(V, 0);
    for (int32_t done = 0, step = 0; done < n; done += chunk, ++step) {
      dds_sample_args a;
      dds_sample_args_init(&a, sizeof a);
      a.num_rows = chunk;
      a.num_requests = 1;
      a.row_offsets = d_offs;  // one request: positions 0..chunk-1
      a.logits = d_l;
      a.temperature = cf.T;
      a.top_k = cf.k;
      a.top_p = cf.p;
      a.min_p = cf.mp;
      a.seed = 0x5eed;
      a.step = (uint32_t)step;
      a.tokens = d_tok;
      REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
      REQUIRE(cudaMemcpy(tok.data(), d_tok, chunk * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
      for (int32_t t : tok) {
        REQUIRE(t >= 0);
        REQUIRE(t < V);
        ++counts[t];
      }
    }
    tu::RefParams q;
    q.T = cf.T;
    q.k = cf.k;
    q.p = cf.p;
    q.min_p = cf.mp;
    const std::vector<long double> pr = tu::ref_processed(c, q);
    long long tot = 0;
    for (long long x : counts) tot += x;
    int df = 0;
    long long outside = 0;
    const double stat = tu::chi_square(counts, pr, tot, &df, &outside);
    const double crit = tu::chi2_critical_1e6(df);
    MESSAGE(std::string(cf.name) << ": n = " << tot << ", chi2 = " << stat << " (df " << df << ", crit " << crit
                    << "), outside the kept set: " << outside);
    CHECK(outside == 0);
    CHECK(stat < crit);
  }
  cudaFree(d_l);
  cudaFree(d_tok);
  cudaFree(d_offs);
  dds_destroy(s);
}

TEST_CASE("statistics: rare tail on the GPU (V = 262144, ~30 expected hits in 4000 draws)") {
  const int32_t V = 262144, D = 4000, chunk = 250;
  const double tail_mass = 0.0075, n_tail = V - 1;
  const double w = tail_mass / (1 - tail_mass) / n_tail;
  const float L = (float)std::log(w);
  const double wf = std::exp((double)L);
  const double p_tail = n_tail * wf / (1 + n_tail * wf);
  const double expected = D * p_tail, sigma = std::sqrt(D * p_tail * (1 - p_tail));
  const double lo = expected - 4 * sigma, hi = expected + 4 * sigma;
  dds_sampler* s = make_sampler(DDS_BACKEND_CUDA, V, chunk, 1);
  std::vector<float> lg((size_t)chunk * V, L);
  for (int j = 0; j < chunk; ++j) lg[(size_t)j * V] = 0.f;
  float* d_l = nullptr;
  int32_t *d_tok = nullptr, *d_offs = nullptr;
  REQUIRE(cudaMalloc(&d_l, lg.size() * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_tok, chunk * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_offs, 8) == cudaSuccess);
  const int32_t offs_h[2] = {0, chunk};
  REQUIRE(cudaMemcpy(d_offs, offs_h, 8, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_l, lg.data(), lg.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<int32_t> tok(chunk);
  long long hits = 0;
  for (int32_t step = 0; step * chunk < D; ++step) {
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = chunk;
    a.num_requests = 1;
    a.row_offsets = d_offs;
    a.logits = d_l;
    a.seed = 0x7a11;
    a.step = (uint32_t)step;
    a.tokens = d_tok;
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    REQUIRE(cudaMemcpy(tok.data(), d_tok, chunk * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int32_t t : tok) hits += t != 0;
  }
  MESSAGE("rare tail (GPU): " << hits << " tail hits, expected " << expected << " +- " << sigma
                              << " (window [" << lo << ", " << hi << "])");
  CHECK(hits >= lo);
  CHECK(hits <= hi);
  cudaFree(d_l);
  cudaFree(d_tok);
  cudaFree(d_offs);
  dds_destroy(s);
}

// Request r of a batch as a batch of its own: its rows (and positions), its parameters; its
// uncond rows stay where they are (uncond_row_offsets keeps pointing at them).
Problem request_alone(const Problem& big, int32_t r) {
  const int32_t b = big.offs[r], e = big.offs[r + 1], n = e - b;
  Problem one = big;  // then cut down to the request
  one.rows = n;
  one.R = 1;
  one.offs = {0, n};
  if (!big.pos.empty()) one.pos.assign(big.pos.begin() + b, big.pos.begin() + e);
  const size_t row_bytes = (size_t)big.stride * esz(big.dtype);
  one.logits.assign(big.logits.begin() + b * row_bytes, big.logits.begin() + e * row_bytes);
  for (auto* v : {&one.T, &one.G, &one.P, &one.MP}) *v = {(*v)[r]};
  one.K = {big.K[r]};
  one.seeds = {big.seeds[r]};
  one.steps = {big.steps[r]};
  one.uoffs = {big.uoffs[r]};
  return one;
}

TEST_CASE("batch invariance: a request alone and inside a large mixed batch") {
  // 200 rows: the same kernels alone and in the batch. 1100 rows of 40 blocks: the batch's
  // unfiltered rows are finished by a warp per row, a request alone by a CTA per row (both add
  // the block terms in the same order: identical statistics, not only tokens). V <= 2048: the
  // batch's unfiltered rows run in small_filter_kernel (plan.small_joint; a CTA per row at 200
  // rows, a warp at 1100), an unfiltered request alone in small_plain_kernel.
  const std::pair<int32_t, int32_t> shapes[] = {{32001, 200}, {40000, 1100}, {2048, 200}, {1025, 1100}};
  for (const auto& shape : shapes) {
  const int32_t V = shape.first, rows = shape.second;
  CAPTURE(V);
  Problem big = make_problem(V, rows, DDS_DTYPE_BF16, 9090, 0, true, DDS_STATS_PROCESSED, false, 0);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, big.R);
  const Results rb = run(gpu, big, true);
  int checked = 0;
  for (int32_t r : {0, 2, 3, 4, 6, 12, 16, 17}) {
    if (r >= big.R) continue;
    const int32_t b = big.offs[r], n = big.offs[r + 1] - b;
    const Results ro = run(gpu, request_alone(big, r), true);
    for (int32_t j = 0; j < n; ++j) {
      INFO("request " << r << " row " << j);
      CHECK(ro.tokens[j] == rb.tokens[b + j]);
      CHECK(ro.argmax[j] == rb.argmax[b + j]);
      CHECK(ro.logprobs[j] == rb.logprobs[b + j]);
      CHECK(ro.entropy[j] == rb.entropy[b + j]);
      ++checked;
    }
    CHECK(ro.status[0] == rb.status[r]);
  }
  CHECK(checked > 8);
  dds_destroy(gpu);
  }
}

TEST_CASE("batch invariance past 256 blocks: the CTA finish's chunked terms") {
  // V = 263168 (257 blocks): a row alone is finished by a CTA that adds its block terms in two
  // chunks of 256 blocks, the same row in a batch of 1024 by a warp per row; both must add in
  // the same order (bit-identical logprob / entropy), in both statistics modes. Unguided,
  // unfiltered bf16 rows (a fast generator: the size, not the distribution, is the point).
  const int32_t V = 263168, rows = 1024;
  Problem big;
  big.V = V;
  big.rows = rows;
  big.R = rows;
  big.dtype = DDS_DTYPE_BF16;
  big.stride = V;
  for (int32_t r = 0; r <= rows; ++r) big.offs.push_back(r);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int32_t r = 0; r < rows; ++r) {
    big.T.push_back(r % 3 == 0 ? 0.7f : 1.f);
    big.G.push_back(0.f);
    big.P.push_back(1.f);
    big.MP.push_back(0.f);
    big.K.push_back(0);
    big.uoffs.push_back(-1);
    big.seeds.push_back(next());
    big.steps.push_back((uint32_t)(next() % 100));
  }
  big.logits.assign((size_t)rows * V * 2, 0);
  for (size_t i = 0; i < (size_t)rows * V; ++i) {
    const uint64_t b = next();  // ~ N(0, 2): a sum of four uniforms, scaled
    const float v = ((float)(b & 0xffff) + (float)((b >> 16) & 0xffff) + (float)((b >> 32) & 0xffff) +
                     (float)(b >> 48) - 131070.f) * (2.f / 37837.f);
    put_value(big.logits, DDS_DTYPE_BF16, i, v);
  }
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, rows);
  for (int32_t stats : {DDS_STATS_PROCESSED, DDS_STATS_GUIDED}) {
    CAPTURE(stats);
    big.stats = stats;
    const Results rb = run(gpu, big, true);
    for (int32_t r : {0, 1, 2, 511, 1023}) {
      INFO("row " << r);
      const Results ro = run(gpu, request_alone(big, r), true);  // (one row per request)
      CHECK(ro.tokens[0] == rb.tokens[r]);
      CHECK(ro.argmax[0] == rb.argmax[r]);
      CHECK(ro.logprobs[0] == rb.logprobs[r]);
      CHECK(ro.entropy[0] == rb.entropy[r]);
      CHECK(ro.conf[0] == rb.conf[r]);
    }
  }
  dds_destroy(gpu);
}

TEST_CASE("graph capture: replay with new seeds, steps and temperatures in device arrays") {
  const int32_t V = 5000, rows = 64;
  Problem pb = make_problem(V, rows, DDS_DTYPE_F32, 4242, 0, true, DDS_STATS_PROCESSED, true,
                            DDS_DTYPE_F32);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  cudaStream_t st;
  REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
  // Device copies that stay alive across the replays.
  Bound b(true);
  std::vector<int32_t> tokens(rows, -7), status(pb.R, -7);
  std::vector<float> lp(rows), probs((size_t)rows * V);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = pb.R;
  a.row_offsets = b.put(pb.offs);
  a.positions = b.put(pb.pos);
  a.logits = b.put(pb.logits);
  a.uncond_logits = b.put(pb.uncond);
  a.uncond_num_rows = pb.unrows;
  a.uncond_row_stride = pb.ustride;
  a.uncond_row_offsets = b.put(pb.uoffs);
  a.guidance_scales = b.put(pb.G);
  float* d_T = b.put(pb.T);
  uint64_t* d_seeds = b.put(pb.seeds);
  uint32_t* d_steps = b.put(pb.steps);
  a.temperatures = d_T;
  a.seeds = d_seeds;
  a.steps = d_steps;
  a.top_ks = b.put(pb.K);
  a.top_ps = b.put(pb.P);
  a.min_ps = b.put(pb.MP);
  a.banned_token = pb.banned;
  a.tokens = b.put(tokens);
  a.logprobs = b.put(lp);
  a.probs = b.put(probs);
  a.request_status = b.put(status);
  dds_status s1 = DDS_OK;
  const CapturedGraph graph(st, [&] { s1 = dds_sample(gpu, &a, st); });
  REQUIRE(s1 == DDS_OK);
  std::mt19937_64 rng(5);
  for (int rep = 0; rep < 4; ++rep) {
    for (int32_t r = 0; r < pb.R; ++r) {
      pb.seeds[r] = rng();
      pb.steps[r] = (uint32_t)(rng() % 1000);
      if (!std::isnan(pb.T[r]) && pb.T[r] > 0.01f) pb.T[r] = 0.5f + (float)(rng() % 100) / 50.f;
    }
    REQUIRE(cudaMemcpy(d_T, pb.T.data(), pb.R * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(d_seeds, pb.seeds.data(), pb.R * 8, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(d_steps, pb.steps.data(), pb.R * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemset(a.tokens, 0xff, rows * 4) == cudaSuccess);
    REQUIRE(cudaMemset(a.logprobs, 0xff, rows * 4) == cudaSuccess);
    graph.launch();
    REQUIRE(cudaStreamSynchronize(st) == cudaSuccess);
    REQUIRE(cudaMemcpy(tokens.data(), a.tokens, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(lp.data(), a.logprobs, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(probs.data(), a.probs, probs.size() * 4, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    pb.want_probs = true;
    const Results rc = run(cpu, pb, false);
    int bad = 0;
    for (int32_t i = 0; i < rows; ++i) {
      bool ok = tokens[i] == rc.tokens[i] && close(lp[i], rc.logprobs[i]);
      for (int32_t t = 0; t < V && ok; ++t)
        ok = close(probs[(size_t)i * V + t], rc.probs[(size_t)i * V + t]);
      bad += !ok;
    }
    MESSAGE("graph replay " << rep << ": " << bad << " differing rows");
    CHECK(bad == 0);
  }
  cudaStreamDestroy(st);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

TEST_CASE("parity: filtered rows through the candidates and the fallback (mixed batches)") {
  uint64_t seed = 900;
  for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    filter_parity(1025, 72, dt, seed++, DDS_STATS_PROCESSED, true);
    filter_parity(5000, 36, dt, seed++, DDS_STATS_GUIDED, false);
    filter_parity(32001, 36, dt, seed++, DDS_STATS_PROCESSED, dt == DDS_DTYPE_F32);
  }
  filter_parity(262144, 36, DDS_DTYPE_BF16, seed++, DDS_STATS_PROCESSED, false);
  filter_parity(151936, 36, DDS_DTYPE_F32, seed++, DDS_STATS_GUIDED, true);
  filter_parity(7, 36, DDS_DTYPE_F32, seed++, DDS_STATS_PROCESSED, true);
  filter_parity(262144, 300, DDS_DTYPE_F32, seed++, DDS_STATS_PROCESSED, false);
}

// A problem of rows from sample_rows' generators: make_row(r, V, rng, put) puts row r's values,
// settings(r, V) gives its filters.
template <class MakeRow, class RowSettings>
Problem generated_problem(int32_t V, int32_t rows, int32_t dt, uint64_t seed, const MakeRow& make_row,
                          const RowSettings& settings) {
  Problem pb = make_filter_problem(V, rows, dt, seed, DDS_STATS_PROCESSED, true);
  std::mt19937_64 rng(seed);
  for (int32_t r = 0; r < rows; ++r) {
    make_row(r, V, rng, [&](int32_t t, float v) { put_value(pb.logits, dt, (size_t)r * V + t, v); });
    const sample_rows::Settings q = settings(r, V);
    pb.T[r] = q.T;
    pb.G[r] = q.g;
    pb.uoffs[r] = q.uo;
    pb.K[r] = q.k;
    pb.P[r] = q.p;
    pb.MP[r] = q.mp;
  }
  return pb;
}

// Every output, probs included, against the CPU oracle, no row allowed to differ, on rows of
// sample_rows' generators (generated_problem).
template <class MakeRow, class RowSettings>
void generated_parity(const char* name, int32_t V, int32_t rows, int32_t dt, uint64_t seed,
                      const MakeRow& make_row, const RowSettings& settings) {
  char what[128];
  std::snprintf(what, sizeof what, "%s V=%d rows=%d dtype=%d", name, V, rows, dt);
  const Problem pb = generated_problem(V, rows, dt, seed, make_row, settings);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  const Results rc = run(cpu, pb, false);
  const Results rg = run(gpu, pb, true);
  CHECK(compare(pb, rc, rg, what) == 0);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

// -0 and +0 are one value (docs/sampling.md §3: the order is value descending, ties by column):
// sample_rows' signed-zero rows, whose top-k, top-p and min-p thresholds fall among the zeros;
// the small kernel (1025, both forms), the candidates (5000) and the many-block rows (40000).
TEST_CASE("parity: -0 and +0 tie at the thresholds (the lower column is kept)") {
  uint64_t seed = 4400;
  for (int32_t V : {1025, 5000, 40000})
    for (int32_t rows : {8, 600})
      for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16})
        generated_parity("signed zeros", V, rows, dt, seed++,
                         [](int32_t r, int32_t v, std::mt19937_64& g, const auto& put) { sample_rows::zero_row(r, v, g, put); },
                         sample_rows::zero_settings);
}

// Ties at the thresholds of few candidates: sample_rows' tie rows (3s and 2s above a low floor),
// whose top-p boundary or top-k cut falls inside a group, so that the split finish's selects on
// a small S (split_row.cuh) meet ties; the candidates (5000), the many-block rows (40000,
// 151936, 262144).
TEST_CASE("parity: tie groups at the thresholds of few candidates") {
  uint64_t seed = 4500;
  for (int32_t V : {5000, 40000, 151936, 262144})
    for (int32_t rows : {8, 64})
      for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16})
        generated_parity("tie groups", V, rows, dt, seed++,
                         [](int32_t r, int32_t v, std::mt19937_64& g, const auto& put) { sample_rows::tie_row(r, v, g, put); },
                         sample_rows::tie_settings);
}

// Two runs' statistics and probabilities, byte for byte.
void check_same_stats(const Results& got, const Results& ref) {
  CHECK(std::memcmp(got.logprobs.data(), ref.logprobs.data(), 4 * ref.logprobs.size()) == 0);
  CHECK(std::memcmp(got.conf.data(), ref.conf.data(), 4 * ref.conf.size()) == 0);
  CHECK(std::memcmp(got.margin.data(), ref.margin.data(), 4 * ref.margin.size()) == 0);
  CHECK(std::memcmp(got.entropy.data(), ref.entropy.data(), 4 * ref.entropy.size()) == 0);
  CHECK(std::memcmp(got.probs.data(), ref.probs.data(), 4 * ref.probs.size()) == 0);
}

// A top-p boundary digit wider than filter_kernel's list of a row in shared memory
// (sample_rows::digit_row: 8000 columns at V = 32000): every plan takes the radix passes over the
// row for it (wide_list_cap is a function of V), so the split fallback's plan (the default at 8
// rows) and the row in shared memory (smem_row=1) give the same bytes, and the CPU's outputs.
TEST_CASE("launch plans: a boundary digit wider than the list, split fallback against the row in shared memory") {
  uint64_t seed = 4600;
  for (int32_t V : {32000, 40000})
    for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16}) {
      const int32_t rows = 8;
      const Problem pb = generated_problem(
          V, rows, dt, seed++,
          [](int32_t r, int32_t v, std::mt19937_64& g, const auto& put) { sample_rows::digit_row(r, v, g, put); },
          sample_rows::digit_settings);
      dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
      dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
      const Results rc = run(cpu, pb, false);
      const Results ref = run(gpu, pb, true);
      char what[128];
      std::snprintf(what, sizeof what, "wide digit V=%d dtype=%d", V, dt);
      CHECK(compare(pb, rc, ref, what) == 0);
      dds::ksample::SamplePlanOverrides o;
      o.smem_row = 1;
      REQUIRE(dds::testing::set_sample_plan(gpu, o) == DDS_OK);
      const Results got = run(gpu, pb, true);
      INFO(what << " plan smem_row=1");
      CHECK(got.tokens == ref.tokens);
      check_same_stats(got, ref);
      dds_destroy(cpu);
      dds_destroy(gpu);
    }
}

// Every plan computes the same bits (kernels/sample/plan.h): the default plan's outputs against
// each forced choice of the launch plan (the internal hook, src/testing.h), byte for byte. The
// direct filter path sums a row's statistics in another order: tokens and argmax exact there,
// statistics within the parity tolerance.
TEST_CASE("launch plans: every forced kernel choice gives the default plan's outputs") {
  struct Shape {
    int32_t V, rows, dtype, stats;
  };
  const Shape shapes[] = {{1025, 40, DDS_DTYPE_F32, DDS_STATS_GUIDED},
                          {2048, 300, DDS_DTYPE_BF16, DDS_STATS_PROCESSED},
                          {1025, 600, DDS_DTYPE_BF16, DDS_STATS_GUIDED},
                          {5000, 40, DDS_DTYPE_BF16, DDS_STATS_PROCESSED},
                          {40000, 22, DDS_DTYPE_F32, DDS_STATS_PROCESSED},
                          {17000, 1030, DDS_DTYPE_F16, DDS_STATS_GUIDED},
                          {151936, 8, DDS_DTYPE_BF16, DDS_STATS_GUIDED},
                          {65536, 16, DDS_DTYPE_BF16, DDS_STATS_PROCESSED},
                          {262144, 8, DDS_DTYPE_F32, DDS_STATS_PROCESSED}};
  // (split=1 is refused above kSplitMaxRows rows: the 1030-row shape keeps the warp finish;
  // splitfilter=1 applies to the fallback's wide top-p rows of V > 16384 with processed
  // statistics: the 40000-, 65536- and 262144-column shapes, whose default plan takes it at their
  // row counts, so splitfilter=0 gives filter_kernel alone (and smem_row=1, at 40000 columns,
  // filter_kernel alone with the row in shared memory); its histograms run beside the split
  // finish by default on both, spec=0 gives them a launch of their own, spec=1,sfcols=2048 runs
  // them beside it over 4 times as many CTAs per row at 262144 columns; there the boundary pass
  // and filter_kernel start while the finish's settled rows run, ovl=0 after the finish; the
  // default plan's call is also replayed from a CUDA graph)
  const char* plans[] = {"cta=0", "cta=1", "small_plain=0", "small_plain=0,fuse=1",
                         "small_plain=0,fuse=0", "small_filter=0", "exact_all=1", "top2=0",
                         "top2=1", "fbpw=1", "fbpw=3", "bpw=1", "bpw=4", "cf_wpc=1",
                         "smem_row=0", "smem_row=1", "filter_grid=1", "split=0", "split=1",
                         "split=1,top2=0", "small_filter=0,split=1", "split=1,rank=0",
                         "split=1,rank=128", "splitfilter=0",
                         "splitfilter=1", "splitfilter=1,split=0", "splitfilter=1,top2=0", "spec=0",
                         "spec=1,sfcols=2048", "ovl=0", "spec=1,top2=0", "split=1,smems=0", "split=1,smems=1024", "joint=0",
                         "direct=1", "default"};
  for (const Shape& sh : shapes) {
    Problem pb = make_filter_problem(sh.V, sh.rows, sh.dtype, 900 + sh.V, sh.stats, true);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, sh.V, sh.rows, pb.R);
    // The shapes whose default plan takes the split fallback: it must take rows (their flat
    // top-p rows), else the splitfilter plans below would compare nothing of it. Its records
    // start from zeroed scratch, so a call that does not run it reads no row taken.
    const bool split = sh.V > dds::ksample::kSplitFiltMinV && sh.stats == DDS_STATS_PROCESSED;
    if (split) REQUIRE(dds::testing::fill_shared_scratch(gpu, 0) == DDS_OK);
    const Results ref = run(gpu, pb, true);
    if (split) {
      std::vector<int32_t> taken(sh.rows, -1);
      REQUIRE(dds::testing::sample_split_rows(gpu, sh.rows, taken.data()) == DDS_OK);
      const long n = std::count(taken.begin(), taken.end(), 1);
      INFO("V=" << sh.V << " rows=" << sh.rows << ": the split fallback took " << n << " rows");
      CHECK(n >= 1);
      // (the flags as the kernels wrote them: 1 or, from the zeroed scratch, 0)
      CHECK(std::count(taken.begin(), taken.end(), 0) + n == sh.rows);
    }
    for (const char* text : plans) {
      dds::ksample::SamplePlanOverrides o;
      const char* err = nullptr;
      REQUIRE(dds::ksample::parse_plan_overrides(text, &o, &err));
      REQUIRE(dds::testing::set_sample_plan(gpu, o) == DDS_OK);
      const bool graph = std::strcmp(text, "default") == 0;
      const Results got = run(gpu, pb, true, nullptr, graph);
      INFO("V=" << sh.V << " rows=" << sh.rows << " dtype=" << sh.dtype << " plan " << text);
      CHECK(got.tokens == ref.tokens);
      CHECK(got.argmax == ref.argmax);
      CHECK(got.status == ref.status);
      if (std::strcmp(text, "direct=1") == 0) {
        CHECK(compare(pb, ref, got, text) == 0);
      } else {
        check_same_stats(got, ref);
      }
    }
    REQUIRE(dds::testing::set_sample_plan(gpu, dds::ksample::SamplePlanOverrides{}) == DDS_OK);
    dds_destroy(gpu);
  }
}

TEST_CASE("scratch not zero at rest: the outputs after the shared scratch is filled with 0xA5") {
  // The workspace that dds_sample shares with dds_verify_drafts and dds_reveal holds whatever
  // the last operation left; every counter and record a call reads must be set by that call.
  // Shapes whose default plans take the split finish, the split fallback, the fallback list and
  // the fused plain pass's counters.
  struct Shape {
    int32_t V, rows, dtype;
  };
  const Shape shapes[] = {{151936, 8, DDS_DTYPE_BF16}, {262144, 8, DDS_DTYPE_F32},
                          {65536, 16, DDS_DTYPE_BF16}, {40000, 22, DDS_DTYPE_F32},
                          {32000, 1030, DDS_DTYPE_F32}};
  for (const Shape& sh : shapes) {
    Problem pb = make_filter_problem(sh.V, sh.rows, sh.dtype, 1300 + sh.V, DDS_STATS_PROCESSED, true);
    dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, sh.V, sh.rows, pb.R);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, sh.V, sh.rows, pb.R);
    const Results rc = run(cpu, pb, false);
    const Results ref = run(gpu, pb, true);  // (a fresh sampler: its scratch is zero)
    {
      char what[128];
      std::snprintf(what, sizeof what, "scratch V=%d rows=%d", sh.V, sh.rows);
      CHECK(compare(pb, rc, ref, what) <= allowed_rows(sh.rows));
    }
    CHECK(dds::testing::fill_shared_scratch(cpu, 0xA5) == DDS_ERR_UNSUPPORTED);
    for (unsigned char byte : {0xA5, 0xFF, 0x00}) {
      REQUIRE(dds::testing::fill_shared_scratch(gpu, byte) == DDS_OK);
      const Results got = run(gpu, pb, true);
      INFO("V=" << sh.V << " rows=" << sh.rows << " fill " << (int)byte);
      CHECK(got.tokens == ref.tokens);
      CHECK(got.argmax == ref.argmax);
      CHECK(got.status == ref.status);
      CHECK(std::memcmp(got.logprobs.data(), ref.logprobs.data(), 4 * ref.logprobs.size()) == 0);
      CHECK(std::memcmp(got.entropy.data(), ref.entropy.data(), 4 * ref.entropy.size()) == 0);
      CHECK(std::memcmp(got.probs.data(), ref.probs.data(), 4 * ref.probs.size()) == 0);
    }
    dds_destroy(gpu);
    dds_destroy(cpu);
  }
}
