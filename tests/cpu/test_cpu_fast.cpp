// The CPU backend's fast path (docs/cpu_backend.md) against the straightforward float64
// reference of tests/cpu/cpu_reference.h: every output (tokens, argmax, log-probs, confidence,
// margin, entropy, probabilities in f32 / bf16 / f16, request status) on random rows of every
// dtype, with and without guidance, greedy and sampled, filtered and not, both statistics modes,
// bans, -inf / NaN / +inf columns, ragged requests, per-request arrays. Argmax and status are
// exact; tokens are exact except counted near-ties (rows where the reference's two block scores
// are within a few fp32 ulps: the backend's come from fp32 block sums), at most 1e-4 of the rows;
// statistics within 1e-5 relative / 1e-6 absolute. Then: the same bits for every thread count,
// the float exp's accuracy, and the same bits from every vector ISA path (cpu_vec.h; this test
// links the static dds_internal for it).
#include <thread>

#include "cpu_reference.h"
#include "cpu_vec.h"
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

bool close(float got, float want, double rel = 1e-5, double abs_tol = 1e-6) {
  if (got == want) return true;  // also equal infinities
  if (!std::isfinite(got) || !std::isfinite(want)) return false;
  return std::fabs((double)got - (double)want) <= rel * std::fabs((double)want) + abs_tol;
}

float prob_at(const Out& o, int32_t dtype, size_t k) {
  if (dtype == DDS_DTYPE_F32) {
    float v;
    std::memcpy(&v, o.probs.data() + 4 * k, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, o.probs.data() + 2 * k, 2);
  return dtype == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
}

// Rows compared with the reference, and rows whose token differs (each one checked to be a
// near-tie of two block scores).
struct NearTies {
  long long rows = 0, differing = 0;
};
NearTies g_ties;

// The backend (got) against the reference (want, with its block scores): argmax and status
// exact; a differing token only between two blocks whose reference scores are within
// 8 fp32 ulps (relative to max(1, |score|)); statistics and probabilities within tolerance.
void check_against_ref(const Case& c, const Out& got, const Out& want,
                       const std::vector<std::vector<double>>& scores, int32_t probs_dtype) {
  CHECK(got.argmax == want.argmax);
  CHECK(got.status == want.status);
  double prel = 1e-5, pabs = 1e-6;  // a 16-bit probability may round the other way
  if (probs_dtype == DDS_DTYPE_BF16) prel = 1.0 / 128;
  if (probs_dtype == DDS_DTYPE_F16) prel = 1.0 / 1024, pabs = 1e-7;
  for (int32_t i = 0; i < c.rows; ++i) {
    CAPTURE(i);
    ++g_ties.rows;
    const bool same_token = got.tokens[i] == want.tokens[i];
    if (!same_token) {
      ++g_ties.differing;
      const int32_t bg = got.tokens[i] / dds::kBlockSize, bw = want.tokens[i] / dds::kBlockSize;
      REQUIRE(scores[i].size() > (size_t)std::max(bg, bw));  // a sampled row
      const double sg = scores[i][bg], sw = scores[i][bw];
      const double tol = 8 * 0x1p-23 * std::max({1.0, std::fabs(sg), std::fabs(sw)});
      MESSAGE("near-tie: row " << i << " token " << got.tokens[i] << " vs " << want.tokens[i]
                               << ", block scores " << sg << " vs " << sw);
      CHECK(bg != bw);
      CHECK(std::fabs(sg - sw) <= tol);
      CHECK(std::isfinite(sg));
    }
    if (same_token) CHECK(close(got.logprobs[i], want.logprobs[i]));
    CHECK(close(got.confidence[i], want.confidence[i]));
    CHECK(close(got.margin[i], want.margin[i]));
    CHECK(close(got.entropy[i], want.entropy[i]));
    if (!want.probs.empty()) {
      int bad = 0;
      for (int32_t t = 0; t < c.V; ++t) {
        const size_t k = (size_t)i * c.V + t;
        bad += !close(prob_at(got, probs_dtype, k), prob_at(want, probs_dtype, k), prel, pabs);
      }
      CHECK(bad == 0);
    }
  }
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
      std::vector<std::vector<double>> scores;
      ref::sample(a, V, &scores);
      const Out one = run_lib(c, 1, probs_dtype, with_probs);
      check_against_ref(c, one, want, scores, probs_dtype);
      check_same(run_lib(c, 3, probs_dtype, with_probs), one);
      // Tokens alone (no statistics asked for) are the same tokens.
      const Out tok = run_lib(c, 1, probs_dtype, false, true);
      CHECK(same_bits(tok.tokens, one.tokens));
      ++cases;
    }
  }
  CHECK(cases == 6 * 22);
}

TEST_CASE("fast path: near-ties with the float64 reference are rare (many rows)") {
  // 6000 rows of 2 blocks (V = 2048) and 400 of 31 blocks (V = 31000), sampled with every
  // statistic: differing tokens only at near-ties (checked row by row), at most 1e-4 of all rows
  // compared in this file (rounded down). About 2 s of CPU.
  std::mt19937_64 rng(0xfa57'0003);
  for (const auto& shape : {std::make_pair(2048, 6000), std::make_pair(31000, 400)}) {
    const int32_t V = shape.first, rows = shape.second;
    const Case c = make_case(rng, V, rows, 40, DDS_DTYPE_F32, 4);
    Out want(c, DDS_DTYPE_F32, false);
    dds_sample_args a = c.args;
    want.attach(&a, DDS_DTYPE_F32, V);
    std::vector<std::vector<double>> scores;
    ref::sample(a, V, &scores);
    check_against_ref(c, run_lib(c, 2, DDS_DTYPE_F32, false), want, scores, DDS_DTYPE_F32);
  }
  MESSAGE("rows compared with the reference: " << g_ties.rows << ", differing tokens (near-ties): "
                                               << g_ties.differing);
  CHECK(g_ties.rows > 6000);
  CHECK(g_ties.differing <= g_ties.rows / 10000);
}

TEST_CASE("exp_f32: within 2 ulp of float64 exp, exact at 0, flushed below 2^-126") {
  using dds::cpu::exp_f32;
  CHECK(exp_f32(0.f) == 1.f);
  CHECK(exp_f32(-kInf) == 0.f);
  CHECK(exp_f32(-87.4f) == 0.f);
  CHECK(exp_f32(-1000.f) == 0.f);
  double worst = 0;
  auto check_at = [&](float x) {
    const double want = std::exp((double)x);
    const double ulp = std::ldexp(1.0, std::ilogb((float)want) - 23);
    worst = std::max(worst, std::fabs((double)exp_f32(x) - want) / ulp);
  };
  // 2^21 points evenly over [-87.33, 88], and 64 per binade of |x| down to 2^-30.
  const int kN = 1 << 21;
  for (int k = 0; k <= kN; ++k) check_at(-87.33f + (88.f + 87.33f) * (float)k / kN);
  for (int e = 0; e <= 30; ++e)
    for (int j = 0; j < 64; ++j) {
      const float x = std::ldexp(1.f + j / 64.f, -e);
      check_at(x);
      check_at(-x);
    }
  MESSAGE("exp_f32 worst error: " << worst << " ulp");
  CHECK(worst <= 2.0);
}

TEST_CASE("vector lanes: every ISA path gives the scalar path's bits") {
  using dds::cpu::VecIsa;
  std::mt19937_64 rng(0xfa57'0004);
  std::normal_distribution<float> nd(0.f, 4.f);
  int paths = 0;
  for (int32_t V : {1, 15, 16, 17, 1023, 1024, 1025, 2049, 5000}) {
    std::vector<float> w(V);
    for (int kind = 0; kind < 4; ++kind) {
      for (auto& v : w) {
        v = nd(rng) * (kind == 3 ? 30.f : 1.f);
        if (kind == 1 && rng() % 3 == 0) v = -kInf;
        if (kind == 2 && rng() % 50 == 0) v = rng() % 2 ? FLT_MAX : -FLT_MAX;
      }
      if (kind == 1 && V > 1030) std::fill(w.begin() + 1024, w.begin() + 1030, -kInf);
      const int32_t nb = (V - 1) / dds::kBlockSize + 1;
      std::vector<float> m0(nb), e0(nb), p0(V);
      std::vector<double> s0(nb);
      REQUIRE(dds::cpu::block_terms_isa(VecIsa::kScalar, w.data(), V, m0.data(), s0.data(),
                                        e0.data()));
      REQUIRE(dds::cpu::softmax_probs_isa(VecIsa::kScalar, w.data(), V, m0[0], 0.5, p0.data()));
      for (VecIsa isa : {VecIsa::kAvx2, VecIsa::kAvx512}) {
        std::vector<float> m(nb), e(nb), p(V);
        std::vector<double> s(nb), s2(nb);
        if (!dds::cpu::block_terms_isa(isa, w.data(), V, m.data(), s.data(), e.data())) continue;
        CAPTURE(V);
        CAPTURE(kind);
        CAPTURE((int)isa);
        CHECK(same_bits(m, m0));
        CHECK(same_bits(s, s0));
        CHECK(same_bits(e, e0));
        // Without the entropy term: the same sums.
        REQUIRE(dds::cpu::block_terms_isa(isa, w.data(), V, m.data(), s2.data(), nullptr));
        CHECK(same_bits(s2, s0));
        REQUIRE(dds::cpu::softmax_probs_isa(isa, w.data(), V, m0[0], 0.5, p.data()));
        CHECK(same_bits(p, p0));
        ++paths;
      }
    }
  }
  MESSAGE("vector ISA of this machine: " << (int)dds::cpu::vec_isa() << ", paths compared: " << paths);
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
