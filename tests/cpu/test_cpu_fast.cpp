// The CPU backend's fast path (docs/cpu_backend.md) against the straightforward reference of
// tests/cpu/cpu_reference.h, bit for bit: every output (tokens, argmax, log-probs, confidence,
// margin, entropy, probabilities in f32 / bf16 / f16, request status) on random rows of every
// dtype, with and without guidance, greedy and sampled, filtered and not, both statistics modes,
// bans, -inf / NaN / +inf columns, ragged requests, per-request arrays; and the same outputs for
// every thread count.
#include <thread>

#include "cpu_reference.h"
#include "test_util.h"

using namespace tu;

namespace {

struct Case {
  int32_t V = 0, rows = 0, requests = 0, dtype = DDS_DTYPE_F32;
  std::vector<uint16_t> logits16, uncond16;
  std::vector<float> logits, uncond;
  std::vector<int32_t> offs, uoffs, pos, ks;
  std::vector<float> temps, gs, ps, mps;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
  dds_sample_args args{};
};

// Every output of one call, poisoned beforehand.
struct Out {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, confidence, margin, entropy;
  std::vector<uint8_t> probs;
  Out(const Case& c, int32_t probs_dtype, bool with_probs)
      : tokens(c.rows, kPoisonI), argmax(c.rows, kPoisonI), status(c.requests, kPoisonI),
        logprobs(c.rows, kPoisonF), confidence(c.rows, kPoisonF), margin(c.rows, kPoisonF),
        entropy(c.rows, kPoisonF),
        probs(with_probs ? (size_t)c.rows * c.V * (probs_dtype == DDS_DTYPE_F32 ? 4 : 2) : 0,
              0x5a) {}
  void attach(dds_sample_args* a, int32_t probs_dtype, int32_t V) {
    a->tokens = tokens.data();
    a->argmax = argmax.data();
    a->request_status = status.data();
    a->logprobs = logprobs.data();
    a->confidence = confidence.data();
    a->margin = margin.data();
    a->entropy = entropy.data();
    a->probs = probs.empty() ? nullptr : probs.data();
    a->probs_dtype = probs_dtype;
    a->probs_row_stride = V;
  }
};

template <typename T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() &&
         (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
}

// A random call: `kind` picks the mix of settings.
Case make_case(std::mt19937_64& rng, int32_t V, int32_t rows, int32_t requests, int32_t dtype,
               int kind) {
  Case c;
  c.V = V;
  c.rows = rows;
  c.requests = requests;
  c.dtype = dtype;
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  const float sigma = 1.f + 6.f * uni(rng);
  std::normal_distribution<float> nd(0.f, sigma);
  auto value = [&]() -> float {
    const float r = uni(rng);
    if (kind % 3 == 2 && r < 0.02f) return -kInf;
    if (kind % 5 == 4 && r < 0.003f) return kNaN;
    if (kind % 7 == 6 && r < 0.001f) return kInf;
    return nd(rng);
  };
  c.logits.resize((size_t)rows * V);
  c.uncond.resize((size_t)rows * V);
  for (auto& v : c.logits) v = value();
  for (auto& v : c.uncond) v = value();
  if (kind % 11 == 10 && rows > 1)  // an empty row
    std::fill(c.logits.begin() + V, c.logits.begin() + 2 * V, -kInf);
  if (dtype != DDS_DTYPE_F32) {
    auto conv = [&](const std::vector<float>& f, std::vector<uint16_t>* h) {
      h->resize(f.size());
      for (size_t k = 0; k < f.size(); ++k)
        (*h)[k] = dtype == DDS_DTYPE_BF16 ? dds::f32_to_bf16(f[k]) : dds::f32_to_f16(f[k]);
    };
    conv(c.logits, &c.logits16);
    conv(c.uncond, &c.uncond16);
  }
  // Ragged requests.
  c.offs.assign(requests + 1, 0);
  for (int32_t r = 1; r < requests; ++r)
    c.offs[r] = std::min(rows, c.offs[r - 1] + (int32_t)(rng() % (2 * rows / requests + 1)));
  c.offs[requests] = rows;
  c.uoffs.resize(requests);
  for (int32_t r = 0; r < requests; ++r) c.uoffs[r] = rng() % 3 == 0 ? -1 : c.offs[r];
  for (int32_t i = 0; i < rows; ++i) c.pos.push_back((int32_t)(rng() % 4096));
  for (int32_t r = 0; r < requests; ++r) {
    const uint64_t pick = rng();
    c.temps.push_back(pick % 6 == 0 ? 0.f : pick % 6 == 1 ? 1.f : 0.3f + 1.5f * uni(rng));
    c.gs.push_back(pick % 4 == 0 ? 0.f : 3.f * uni(rng) - 0.5f);
    c.ks.push_back(kind % 2 == 1 && rng() % 2 ? (int32_t)(rng() % (V + 2)) : 0);
    c.ps.push_back(kind % 2 == 1 && rng() % 2 ? uni(rng) : 1.f);
    c.mps.push_back(kind % 2 == 1 && rng() % 3 == 0 ? 0.2f * uni(rng) : 0.f);
    c.seeds.push_back(rng());
    c.steps.push_back((uint32_t)rng());
  }
  dds_sample_args& a = c.args;
  REQUIRE(dds_sample_args_init(&a, sizeof a) == DDS_OK);
  a.num_rows = rows;
  a.num_requests = requests;
  a.row_offsets = c.offs.data();
  a.positions = kind % 2 ? c.pos.data() : nullptr;
  a.dtype = dtype;
  a.row_stride = V;  // explicit: the reference reads the struct as the backend gets it
  a.uncond_row_stride = V;
  a.logits = dtype == DDS_DTYPE_F32 ? (const void*)c.logits.data() : c.logits16.data();
  if (kind % 4 >= 2) {
    a.uncond_logits = dtype == DDS_DTYPE_F32 ? (const void*)c.uncond.data() : c.uncond16.data();
    a.uncond_num_rows = rows;
    a.uncond_row_offsets = c.uoffs.data();
    a.guidance_scales = c.gs.data();
  }
  a.temperatures = c.temps.data();
  a.top_ks = c.ks.data();
  a.top_ps = c.ps.data();
  a.min_ps = c.mps.data();
  a.seeds = c.seeds.data();
  a.steps = c.steps.data();
  a.banned_token = kind % 3 == 0 ? (int32_t)(rng() % V) : -1;
  a.stats = kind % 5 == 1 ? DDS_STATS_GUIDED : DDS_STATS_PROCESSED;
  return c;
}

dds_sampler* make_sampler(int32_t V, int32_t rows, int32_t requests, int32_t threads) {
  dds_sampler_config cfg;
  REQUIRE(dds_sampler_config_init(&cfg, sizeof cfg) == DDS_OK);
  cfg.vocab_size = V;
  cfg.max_rows = rows;
  cfg.max_requests = requests;
  cfg.num_threads = threads;
  dds_sampler* s = nullptr;
  REQUIRE(dds_create(&cfg, &s) == DDS_OK);
  return s;
}

// Runs the case on the library (num_threads) and returns the outputs.
Out run_lib(const Case& c, int32_t threads, int32_t probs_dtype, bool with_probs,
            bool only_tokens = false) {
  dds_sampler* s = make_sampler(c.V, c.rows, c.requests, threads);
  Out o(c, probs_dtype, with_probs);
  dds_sample_args a = c.args;
  o.attach(&a, probs_dtype, c.V);
  if (only_tokens) {
    a.logprobs = a.confidence = a.margin = a.entropy = nullptr;
    a.argmax = nullptr;
  }
  const dds_status st = dds_sample(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  dds_destroy(s);
  return o;
}

void check_same(const Out& x, const Out& y) {
  CHECK(same_bits(x.tokens, y.tokens));
  CHECK(same_bits(x.argmax, y.argmax));
  CHECK(same_bits(x.status, y.status));
  CHECK(same_bits(x.logprobs, y.logprobs));
  CHECK(same_bits(x.confidence, y.confidence));
  CHECK(same_bits(x.margin, y.margin));
  CHECK(same_bits(x.entropy, y.entropy));
  CHECK(same_bits(x.probs, y.probs));
}

}  // namespace

TEST_CASE("fast path: the reference's bits on random rows") {
  std::mt19937_64 rng(0xfa57'0001);
  const int32_t Vs[] = {1, 7, 1024, 1025, 2500, 4097};
  const int32_t dtypes[] = {DDS_DTYPE_F32, DDS_DTYPE_BF16, DDS_DTYPE_F16};
  int cases = 0;
  for (int32_t V : Vs) {
    for (int kind = 0; kind < 22; ++kind) {
      const int32_t dtype = dtypes[kind % 3];
      const int32_t rows = 1 + (int32_t)(rng() % 9), requests = 1 + (int32_t)(rng() % rows);
      const Case c = make_case(rng, V, rows, requests, dtype, kind);
      const int32_t probs_dtype = dtypes[(kind / 3) % 3];
      const bool with_probs = kind % 2 == 0;
      CAPTURE(V);
      CAPTURE(kind);
      Out want(c, probs_dtype, with_probs);
      dds_sample_args a = c.args;
      want.attach(&a, probs_dtype, V);
      ref::sample(a, V);
      for (int32_t threads : {1, 3}) {
        CAPTURE(threads);
        check_same(run_lib(c, threads, probs_dtype, with_probs), want);
      }
      // Tokens alone (no statistics asked for) are the same tokens.
      const Out tok = run_lib(c, 1, probs_dtype, false, true);
      CHECK(same_bits(tok.tokens, want.tokens));
      ++cases;
    }
  }
  CHECK(cases == 6 * 22);
}

TEST_CASE("fast path: outputs do not depend on the thread count") {
  // Enough elements that every thread count up to 4 gets its own part of the rows.
  std::mt19937_64 rng(0xfa57'0002);
  for (int kind = 0; kind < 4; ++kind) {
    const Case c = make_case(rng, 3001, 64, 5, DDS_DTYPE_F32, kind);
    CAPTURE(kind);
    const Out one = run_lib(c, 1, DDS_DTYPE_BF16, true);
    for (int32_t threads : {0, 2, 3, 4, 7}) {
      CAPTURE(threads);
      check_same(run_lib(c, threads, DDS_DTYPE_BF16, true), one);
    }
  }
}

TEST_CASE("num_threads: out of range is rejected, naming the field") {
  dds_sampler_config cfg;
  REQUIRE(dds_sampler_config_init(&cfg, sizeof cfg) == DDS_OK);
  CHECK(cfg.num_threads == 0);
  cfg.vocab_size = 10;
  dds_sampler* s = nullptr;
  for (int32_t bad : {-1, 257}) {
    cfg.num_threads = bad;
    CHECK(dds_create(&cfg, &s) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(s == nullptr);
    CHECK(std::string(dds_last_error()).find("num_threads") != std::string::npos);
  }
}
