// Reliability: hostile numbers on the CPU backend (issue 11). Every case has the result that
// docs/sampling.md §1-2 and §7 document: a defined token in [0, V) always, the per-request
// status flag where a value was replaced, finite statistics where the contract says so, and in
// DDS_FLAG_DEBUG_CHECKS mode an error naming the request. Also the regression tests of what the
// fuzz targets (tests/fuzz/) found.
#include <cfloat>
#include <cmath>

#include "test_util.h"

using namespace tu;

namespace {

constexpr int kSeeds = 64;

// The contract of one written row of a successful dds_sample with every output given (f32
// probs, dense): token and argmax in [0, V), statistics in range and finite, probs a
// distribution (or all zero for an empty row).
void check_row(const Outputs& o, int32_t i, int32_t V, bool empty) {
  INFO("row " << i);
  REQUIRE(o.tokens[i] >= 0);
  REQUIRE(o.tokens[i] < V);
  REQUIRE(o.argmax[i] >= 0);
  REQUIRE(o.argmax[i] < V);
  CHECK(!std::isnan(o.logprobs[i]));
  CHECK(o.logprobs[i] <= 0.f);
  CHECK(std::isfinite(o.confidence[i]));
  CHECK(o.confidence[i] >= 0.f);
  CHECK(o.confidence[i] <= 1.f);
  CHECK(o.margin[i] >= 0.f);
  CHECK(o.margin[i] <= o.confidence[i]);
  CHECK(std::isfinite(o.entropy[i]));
  CHECK(o.entropy[i] >= 0.f);
  CHECK(o.entropy[i] <= std::log((double)V) + 1e-4);
  double sum = 0;
  for (int32_t t = 0; t < V; ++t) {
    const float p = o.probs[(size_t)i * V + t];
    CHECK(p >= 0.f);
    CHECK(p <= 1.f);
    sum += p;
  }
  if (empty) {
    CHECK(o.tokens[i] == 0);
    CHECK(o.argmax[i] == 0);
    CHECK(o.logprobs[i] == -kInf);
    CHECK(o.confidence[i] == 0.f);
    CHECK(o.margin[i] == 0.f);
    CHECK(o.entropy[i] == 0.f);
    CHECK(sum == 0.0);
  } else {
    CHECK(std::isfinite(o.logprobs[i]));
    CHECK(o.confidence[i] > 0.f);
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
}

// One request of one row: samples `row` with the scalar settings in `a` (logits, layout and
// outputs are filled in here) under both stats modes, checks the row contract, and returns the
// processed-mode outputs.
Outputs sample_row(dds_sampler* s, const std::vector<float>& row, dds_sample_args a,
                   bool expect_empty = false) {
  const int32_t V = (int32_t)row.size();
  a.num_rows = 1;
  a.num_requests = 1;
  a.logits = row.data();
  Outputs guided(1, 1, V);
  {
    dds_sample_args g = a;
    g.stats = DDS_STATS_GUIDED;
    guided.attach(&g);
    const dds_status st = dds_sample(s, &g, nullptr);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
    check_row(guided, 0, V, expect_empty);
  }
  a.stats = DDS_STATS_PROCESSED;
  Outputs o = run_sample_probs(s, a, V);
  check_row(o, 0, V, expect_empty);
  CHECK(o.tokens[0] == guided.tokens[0]);  // stats mode never changes the token
  CHECK(o.argmax[0] == guided.argmax[0]);
  CHECK(((o.status[0] & DDS_REQ_EMPTY_ROW) != 0) == expect_empty);
  return o;
}

// Tokens of `row` under seeds 0..kSeeds-1.
std::vector<int32_t> tokens_over_seeds(dds_sampler* s, const std::vector<float>& row,
                                       dds_sample_args a, int32_t* status = nullptr) {
  std::vector<int32_t> out;
  for (int seed = 0; seed < kSeeds; ++seed) {
    a.seed = (uint64_t)seed;
    Outputs o = sample_row(s, row, a);
    out.push_back(o.tokens[0]);
    if (status) *status = o.status[0];
  }
  return out;
}

// The same per-request value given through the [num_requests] array (so that it is sanitised
// and flagged instead of rejected), on a one-request call.
struct PerRequest {
  float T = 1.f, g = 0.f, p = 1.f, mp = 0.f;
  int32_t k = 0;
};
Outputs sample_per_request(dds_sampler* s, const std::vector<float>& row, const PerRequest& q,
                           uint64_t seed, const std::vector<float>* uncond = nullptr) {
  const int32_t V = (int32_t)row.size();
  dds_sample_args a = sample_args();
  a.num_rows = 1;
  a.num_requests = 1;
  a.logits = row.data();
  a.temperatures = &q.T;
  a.guidance_scales = &q.g;
  a.top_ks = &q.k;
  a.top_ps = &q.p;
  a.min_ps = &q.mp;
  a.seed = seed;
  if (uncond) {
    a.uncond_logits = uncond->data();
    a.uncond_num_rows = 1;
  }
  Outputs o = run_sample_probs(s, a, V);
  check_row(o, 0, V, false);
  return o;
}

std::vector<float> ramp(int32_t V, float scale = 1.f, float offset = 0.f) {
  std::vector<float> r(V);
  for (int32_t t = 0; t < V; ++t) r[t] = offset + scale * (float)((t * 7) % V) / (float)V;
  return r;
}

int32_t first_max(const std::vector<float>& r) {
  return (int32_t)(std::max_element(r.begin(), r.end()) - r.begin());
}

}  // namespace

TEST_CASE("hostile rows: all -inf, all NaN, NaN and -inf mixed, everything banned -> EMPTY_ROW") {
  const int32_t V = 9;
  Sampler s(V);
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<float> row(V);
    for (int32_t t = 0; t < V; ++t)
      row[t] = kind == 0 ? -kInf : kind == 1 ? kNaN : (t % 2 ? kNaN : -kInf);
    for (float T : {1.f, 0.f, 1e-30f, 1e30f}) {
      INFO("kind " << kind << " T " << T);
      dds_sample_args a = sample_args();
      a.temperature = T;
      a.top_k = 3;
      a.top_p = 0.5f;
      a.min_p = 0.5f;
      sample_row(s, row, a, /*expect_empty=*/true);
    }
  }
  // V = 1 with its only token banned.
  Sampler one(1);
  dds_sample_args a = sample_args();
  a.banned_token = 0;
  sample_row(one, {3.f}, a, true);
  // Every finite column banned or NaN.
  std::vector<float> row(V, kNaN);
  row[4] = 2.f;
  a = sample_args();
  a.banned_token = 4;
  sample_row(s, row, a, true);
}

TEST_CASE("NaN logits are never sampled, have probability 0, and do not poison the statistics") {
  const int32_t V = 40;
  Sampler s(V);
  std::vector<float> row = ramp(V, 4.f);
  for (int32_t t = 0; t < V; t += 3) row[t] = kNaN;
  dds_sample_args a = sample_args();
  for (int32_t tok : tokens_over_seeds(s, row, a)) CHECK(!std::isnan(row[tok]));
  Outputs o = sample_row(s, row, a);
  for (int32_t t = 0; t < V; t += 3) CHECK(o.probs[t] == 0.f);
  CHECK(!std::isnan(row[o.argmax[0]]));
}

TEST_CASE("+inf logits count as FLT_MAX: one wins always, two tie at 1/2 each") {
  const int32_t V = 16;
  Sampler s(V);
  std::vector<float> row = ramp(V, 3.f);
  row[11] = kInf;
  for (float T : {1.f, 0.5f, 1e-30f, 2.f}) {
    INFO("T " << T);
    dds_sample_args a = sample_args();
    a.temperature = T;
    for (int32_t tok : tokens_over_seeds(s, row, a)) CHECK(tok == 11);
    Outputs o = sample_row(s, row, a);
    CHECK(o.confidence[0] == 1.f);
    CHECK(o.probs[11] == 1.f);
  }
  row[5] = kInf;  // a tie at FLT_MAX (T = 0.5: FLT_MAX * 2 = inf -> FLT_MAX again)
  for (float T : {1.f, 0.5f}) {
    INFO("T " << T);
    dds_sample_args a = sample_args();
    a.temperature = T;
    for (int32_t tok : tokens_over_seeds(s, row, a)) CHECK((tok == 5 || tok == 11));
    Outputs o = sample_row(s, row, a);
    CHECK(o.argmax[0] == 5);  // ties: lower id
    CHECK(o.confidence[0] == doctest::Approx(0.5));
    CHECK(o.margin[0] == 0.f);
    CHECK(o.probs[5] == doctest::Approx(0.5));
    CHECK(o.probs[11] == doctest::Approx(0.5));
    CHECK(o.entropy[0] == doctest::Approx(std::log(2.0)));
  }
}

// KNOWN ISSUE (docs/sampling.md §8, not fixed here: it changes the spec's arithmetic that the
// GPU must match bit for bit): docs/sampling.md §4 adds the Gumbel to a_t itself in float64
// ((double)a_t + G, s_b + G with s_b = m + log S_b). When |a| is huge (ties at FLT_MAX from +inf
// logits, or equal logits at T = 1e-30 where a ~ 1e30) the float64 ulp of a exceeds any Gumbel
// (ulp(3.4e38) ~ 4e22), the noise is absorbed and the lowest tied id always wins instead of each
// tied token with probability 1/n. Subtracting m first ((a_t - m) + G, log S_b + G) would fix
// it. The statistics are already right (confidence 0.5 above). may_fail: reported, not failing.
TEST_CASE("KNOWN ISSUE: tokens tied at a huge value are sampled uniformly" * doctest::may_fail()) {
  const int32_t V = 16;
  Sampler s(V);
  std::vector<float> row = ramp(V, 3.f);
  row[5] = kInf;
  row[11] = kInf;
  dds_sample_args a = sample_args();
  int n5 = 0, n11 = 0;
  for (int32_t tok : tokens_over_seeds(s, row, a)) {
    n5 += tok == 5;
    n11 += tok == 11;
  }
  CHECK(n5 > 0);
  CHECK(n11 > 0);
  // Equal logits at a tiny temperature: a = 5e30 for both.
  std::vector<float> eq(V, -kInf);
  eq[2] = 5.f;
  eq[9] = 5.f;
  a.temperature = 1e-30f;
  int n2 = 0, n9 = 0;
  for (int32_t tok : tokens_over_seeds(s, eq, a)) {
    n2 += tok == 2;
    n9 += tok == 9;
  }
  CHECK(n2 > 0);
  CHECK(n9 > 0);
}

TEST_CASE("huge and tiny temperatures: 1e30 and FLT_MAX near uniform, 1e-30 the argmax, denormal greedy") {
  const int32_t V = 12;
  Sampler s(V);
  std::vector<float> row = ramp(V, 5.f);
  const int32_t am = first_max(row);
  for (float T : {1e30f, FLT_MAX}) {
    INFO("T " << T);
    dds_sample_args a = sample_args();
    a.temperature = T;
    Outputs o = sample_row(s, row, a);
    for (int32_t t = 0; t < V; ++t) CHECK(o.probs[t] == doctest::Approx(1.0 / V).epsilon(1e-4));
    CHECK(o.entropy[0] == doctest::Approx(std::log((double)V)).epsilon(1e-4));
    std::vector<int32_t> toks = tokens_over_seeds(s, row, a);
    std::sort(toks.begin(), toks.end());
    CHECK(std::unique(toks.begin(), toks.end()) - toks.begin() > V / 2);  // spread out
  }
  // 1e-30: not greedy (1/T = 1e30 is finite) but a = l * 1e30 separates the top token by ~1e28.
  {
    dds_sample_args a = sample_args();
    a.temperature = 1e-30f;
    for (int32_t tok : tokens_over_seeds(s, row, a)) CHECK(tok == am);
    Outputs o = sample_row(s, row, a);
    CHECK(o.confidence[0] == 1.f);
    CHECK(o.logprobs[0] == 0.f);
  }
  // Denormal temperatures: 1/T overflows (T < 2^-128), greedy: processed stats one-hot.
  for (float T : {1e-40f, 1e-45f, 2.9e-39f}) {
    INFO("T " << T);
    dds_sample_args a = sample_args();
    a.temperature = T;
    Outputs o = sample_row(s, row, a);
    CHECK(o.tokens[0] == am);
    CHECK(o.confidence[0] == 1.f);
    CHECK(o.margin[0] == 1.f);
    CHECK(o.entropy[0] == 0.f);
    CHECK(o.status[0] == 0);
  }
}

TEST_CASE("per-request NaN, negative and infinite temperatures: T = 1 and DDS_REQ_BAD_TEMPERATURE") {
  const int32_t V = 20;
  Sampler s(V);
  const std::vector<float> row = ramp(V, 6.f);
  for (float bad : {kNaN, -1.f, -kInf, kInf, -1e-40f}) {
    INFO("T " << bad);
    for (uint64_t seed = 0; seed < 16; ++seed) {
      PerRequest q;
      q.T = bad;
      Outputs o = sample_per_request(s, row, q, seed);
      PerRequest ref;
      Outputs r = sample_per_request(s, row, ref, seed);
      CHECK(o.tokens[0] == r.tokens[0]);
      CHECK(o.logprobs[0] == r.logprobs[0]);
      CHECK(o.status[0] == DDS_REQ_BAD_TEMPERATURE);
    }
  }
  // -0.0 is a valid T = 0 (greedy), not a bad value.
  PerRequest q;
  q.T = -0.f;
  Outputs o = sample_per_request(s, row, q, 3);
  CHECK(o.status[0] == 0);
  CHECK(o.tokens[0] == first_max(row));
}

TEST_CASE("regression: every kept column's l * invT overflows to -inf (fuzz_sample)") {
  // Before the fix, l = -1e9 at T = 1e-30 gave a = -inf for every K0 column: m = -inf, the
  // filters NaN, min-p dropped every column and two_level_sample read keep[-1024..-1]
  // (ASan: heap-buffer-overflow / SEGV). Now such columns are -FLT_MAX (the mirror of +inf ->
  // FLT_MAX), so they tie: a defined token, finite statistics.
  const int32_t V = 6;
  Sampler s(V);
  const std::vector<float> row = {-1e9f, -2e9f, -3e9f, -4e9f, -kInf, kNaN};
  for (int f = 0; f < 4; ++f) {
    INFO("filter " << f);
    dds_sample_args a = sample_args();
    a.temperature = 1e-30f;
    if (f == 1) a.min_p = 0.5f;
    if (f == 2) a.top_p = 0.5f;
    if (f == 3) a.top_k = 2;
    for (int32_t tok : tokens_over_seeds(s, row, a)) {
      CHECK(tok >= 0);
      CHECK(tok < 4);  // never the -inf or NaN column
    }
    Outputs o = sample_row(s, row, a);
    CHECK(o.argmax[0] == 0);
  }
  // Huge logits at T = 0.5 overflow both ways; the +inf side was already FLT_MAX.
  const std::vector<float> big = {-3e38f, 3e38f, -3e38f, 1.f, -kInf, kNaN};
  dds_sample_args a = sample_args();
  a.temperature = 0.5f;
  a.min_p = 0.9f;
  for (int32_t tok : tokens_over_seeds(s, big, a)) CHECK(tok == 1);
  // Only -3e38 columns: they tie at -FLT_MAX.
  const std::vector<float> neg = {-3e38f, -3e38f, -kInf, -2e38f, -kInf, kNaN};
  a.min_p = 0.5f;
  std::vector<int32_t> toks = tokens_over_seeds(s, neg, a);
  for (int32_t tok : toks) CHECK((tok == 0 || tok == 1 || tok == 3));
  // Mixed: the finite column wins.
  const std::vector<float> mixed = {-1e9f, 1.f, -2e9f, -kInf, kNaN, -kInf};
  a = sample_args();
  a.temperature = 1e-30f;
  a.min_p = 0.1f;
  for (int32_t tok : tokens_over_seeds(s, mixed, a)) CHECK(tok == 1);
}

TEST_CASE("guidance scales that overflow: +inf -> FLT_MAX, -inf drops the column, all dropped -> EMPTY_ROW") {
  const int32_t V = 3;
  Sampler s(V);
  const std::vector<float> c = {1.f, 2.f, 3.f}, u = {3.f, 2.f, 1.f};  // c - u = -2, 0, 2
  dds_sample_args a = sample_args();
  a.uncond_logits = u.data();
  a.uncond_num_rows = 1;
  a.guidance_scale = 1e30f;  // l = -2e30, 2, 2e30
  for (int32_t tok : tokens_over_seeds(s, c, a)) CHECK(tok == 2);
  a.guidance_scale = FLT_MAX;  // l = -inf (dropped), 2, +inf -> FLT_MAX
  Outputs o = sample_row(s, c, a);
  CHECK(o.tokens[0] == 2);
  CHECK(o.probs[0] == 0.f);
  // Both columns overflow to -inf: the row is empty.
  const std::vector<float> c2 = {1e30f, 2e30f, -kInf}, u2 = {-1e30f, -1e30f, 0.f};
  dds_sample_args b = sample_args();
  b.uncond_logits = u2.data();
  b.uncond_num_rows = 1;
  b.guidance_scale = -1e30f;
  sample_row(s, c2, b, /*expect_empty=*/true);
  // c - u itself overflows (3e38 - -3e38 = inf): g > 0 gives +inf -> FLT_MAX, never NaN.
  const std::vector<float> c3 = {3e38f, 0.f, 1.f}, u3 = {-3e38f, 0.f, 0.f};
  b.uncond_logits = u3.data();
  b.guidance_scale = 2.f;
  o = sample_row(s, c3, b);
  CHECK(o.tokens[0] == 0);
  // Per-request NaN / inf guidance: g = 0 (unguided) and DDS_REQ_BAD_GUIDANCE.
  for (float bad : {kNaN, kInf, -kInf}) {
    for (uint64_t seed = 0; seed < 8; ++seed) {
      PerRequest q;
      q.g = bad;
      Outputs g = sample_per_request(s, c, q, seed, &u);
      PerRequest ref;
      Outputs r = sample_per_request(s, c, ref, seed);
      CHECK(g.tokens[0] == r.tokens[0]);
      CHECK(g.status[0] == DDS_REQ_BAD_GUIDANCE);
    }
  }
}

TEST_CASE("top-k: k >= V and huge k are off, negative k is off and flagged") {
  const int32_t V = 10;
  Sampler s(V);
  const std::vector<float> row = ramp(V, 3.f);
  for (uint64_t seed = 0; seed < 24; ++seed) {
    PerRequest off;
    const int32_t ref = sample_per_request(s, row, off, seed).tokens[0];
    for (int32_t k : {V, V + 1, INT32_MAX}) {
      PerRequest q;
      q.k = k;
      Outputs o = sample_per_request(s, row, q, seed);
      CHECK(o.tokens[0] == ref);
      CHECK(o.status[0] == 0);
    }
    for (int32_t k : {-1, INT32_MIN}) {
      PerRequest q;
      q.k = k;
      Outputs o = sample_per_request(s, row, q, seed);
      CHECK(o.tokens[0] == ref);
      CHECK(o.status[0] == DDS_REQ_BAD_TOP_K);
    }
  }
  // Scalar negative k is a host-visible argument: rejected, nothing written.
  dds_sample_args a = basic_args(row, 1);
  a.top_k = -1;
  Outputs o(1, 1, V);
  o.attach(&a);
  CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(contains(dds_last_error(), "args->top_k"));
  CHECK(o.untouched());
}

TEST_CASE("top-p: p <= 0 keeps the single best token, p > 1 is off, NaN is off and flagged") {
  const int32_t V = 10;
  Sampler s(V);
  std::vector<float> row = ramp(V, 2.f);
  const int32_t m = first_max(row), tie = m == 1 ? 2 : 1;
  row[tie] = row[m];  // a tie at the top: the lower id is the best token
  const int32_t best = std::min(m, tie);
  for (uint64_t seed = 0; seed < 24; ++seed) {
    for (float p : {0.f, -0.f, -1.f, -kInf, 1e-40f}) {
      PerRequest q;
      q.p = p;
      Outputs o = sample_per_request(s, row, q, seed);
      CHECK(o.tokens[0] == best);
      CHECK(o.confidence[0] == 1.f);
    }
    PerRequest off;
    const int32_t ref = sample_per_request(s, row, off, seed).tokens[0];
    for (float p : {1.5f, kInf, FLT_MAX}) {
      PerRequest q;
      q.p = p;
      CHECK(sample_per_request(s, row, q, seed).tokens[0] == ref);
    }
    PerRequest q;
    q.p = kNaN;
    Outputs o = sample_per_request(s, row, q, seed);
    CHECK(o.tokens[0] == ref);
    CHECK(o.status[0] == DDS_REQ_BAD_TOP_P);
  }
}

TEST_CASE("min-p >= 1 keeps only the top (tied) tokens; NaN or negative min-p is off and flagged") {
  const int32_t V = 10;
  Sampler s(V);
  std::vector<float> row = ramp(V, 2.f);
  const int32_t best = first_max(row), tie = best == 2 ? 3 : 2;
  row[tie] = row[best];  // tie at the top
  for (uint64_t seed = 0; seed < 24; ++seed) {
    for (float mp : {1.f, 1.5f, kInf, FLT_MAX}) {
      PerRequest q;
      q.mp = mp;
      Outputs o = sample_per_request(s, row, q, seed);
      CHECK((o.tokens[0] == best || o.tokens[0] == tie));
      CHECK(o.status[0] == 0);
    }
    PerRequest off;
    const int32_t ref = sample_per_request(s, row, off, seed).tokens[0];
    for (float mp : {kNaN, -0.5f, -kInf}) {
      PerRequest q;
      q.mp = mp;
      Outputs o = sample_per_request(s, row, q, seed);
      CHECK(o.tokens[0] == ref);
      CHECK(o.status[0] == DDS_REQ_BAD_MIN_P);
    }
  }
}

TEST_CASE("every per-request value bad at once: all five flags, the request still sampled") {
  const int32_t V = 8;
  Sampler s(V);
  const std::vector<float> row = ramp(V, 2.f), u = ramp(V, 1.f);
  PerRequest q;
  q.T = kNaN;
  q.g = kInf;
  q.k = -3;
  q.p = kNaN;
  q.mp = -1.f;
  Outputs o = sample_per_request(s, row, q, 5, &u);
  CHECK(o.status[0] == (DDS_REQ_BAD_TEMPERATURE | DDS_REQ_BAD_GUIDANCE | DDS_REQ_BAD_TOP_K |
                        DDS_REQ_BAD_TOP_P | DDS_REQ_BAD_MIN_P));
  PerRequest ref;
  CHECK(o.tokens[0] == sample_per_request(s, row, ref, 5).tokens[0]);
}

TEST_CASE("denormal logits (f32, bf16, f16) and denormal parameters") {
  const int32_t V = 4;
  Sampler s(V);
  const std::vector<float> row = {1e-40f, -1e-40f, 0.f, 1e-45f};
  dds_sample_args a = sample_args();
  Outputs o = sample_row(s, row, a);
  for (int32_t t = 0; t < V; ++t) CHECK(o.probs[t] == doctest::Approx(0.25));
  a.temperature = 1e-40f;  // greedy: argmax is the first maximum (1e-40 at 0)
  o = sample_row(s, row, a);
  CHECK(o.tokens[0] == 0);
  // bf16 / f16 subnormal bit patterns.
  for (int32_t dtype : {DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    const std::vector<uint16_t> h = {0x0001, 0x8001, 0x0000, 0x0003};
    dds_sample_args b = sample_args();
    b.num_rows = 1;
    b.num_requests = 1;
    b.logits = h.data();
    b.dtype = dtype;
    Outputs ob = run_sample_probs(s, b, V);
    check_row(ob, 0, V, false);
    CHECK(ob.argmax[0] == 3);
  }
  // Denormal guidance scale: l = fmaf(1e-40, c - u, c) ~ c (the request is guided).
  const std::vector<float> c = ramp(V, 3.f), u(V, 100.f);
  dds_sample_args g = sample_args();
  g.uncond_logits = u.data();
  g.uncond_num_rows = 1;
  g.guidance_scale = 1e-40f;
  g.temperature = 0.f;
  o = sample_row(s, c, g);
  CHECK(o.tokens[0] == first_max(c));
}

TEST_CASE("a batch mixing every hostile request: flags per request, other requests unaffected") {
  const int32_t V = 33, R = 6;
  Sampler s(V);
  std::vector<float> logits((size_t)R * V);
  for (int32_t r = 0; r < R; ++r)
    for (int32_t t = 0; t < V; ++t) logits[(size_t)r * V + t] = (float)((r * 13 + t * 7) % V) / 4.f;
  for (int32_t t = 0; t < V; ++t) logits[(size_t)1 * V + t] = -kInf;  // request 1: empty row
  logits[(size_t)2 * V + 5] = kNaN;
  logits[(size_t)3 * V + 9] = kInf;
  const std::vector<float> temps = {1.f, 1.f, kNaN, 1e-40f, 1e30f, 1.f};
  const std::vector<int32_t> ks = {0, 0, -1, V + 5, 0, 1};
  const std::vector<float> ps = {1.f, 1.f, 1.f, kNaN, -1.f, 1.f};
  const std::vector<float> mps = {0.f, 0.f, 0.f, 0.f, 2.f, -kInf};
  dds_sample_args a = basic_args(logits, R);
  a.temperatures = temps.data();
  a.top_ks = ks.data();
  a.top_ps = ps.data();
  a.min_ps = mps.data();
  Outputs o = run_sample_probs(s, a, V);
  for (int32_t r = 0; r < R; ++r) check_row(o, r, V, r == 1);
  CHECK(o.status[0] == 0);
  CHECK(o.status[1] == DDS_REQ_EMPTY_ROW);
  CHECK(o.status[2] == (DDS_REQ_BAD_TEMPERATURE | DDS_REQ_BAD_TOP_K));
  CHECK(o.status[3] == DDS_REQ_BAD_TOP_P);
  CHECK(o.tokens[3] == 9);  // greedy on the +inf column
  CHECK(o.status[4] == 0);
  CHECK(o.status[5] == DDS_REQ_BAD_MIN_P);
  // Request 0 alone samples the same token (batch invariance survives hostile neighbours).
  std::vector<float> row0(logits.begin(), logits.begin() + V);
  dds_sample_args b = basic_args(row0, 1);
  CHECK(run_sample(s, b).tokens[0] == o.tokens[0]);
}

TEST_CASE("debug mode: each bad per-request value is DDS_ERR_INVALID_VALUE naming the request") {
  const int32_t V = 8, R = 4;
  Sampler s(V, 16, 16, 20, DDS_FLAG_DEBUG_CHECKS);
  std::vector<float> logits((size_t)R * V, 0.5f);
  struct Case {
    const char* name;
    int which;
    float f;
    int32_t k;
  };
  const Case cases[] = {{"temperatures", 0, kNaN, 0},  {"temperatures", 0, -1.f, 0},
                        {"temperatures", 0, kInf, 0},  {"guidance_scales", 1, kNaN, 0},
                        {"guidance_scales", 1, -kInf, 0}, {"top_ks", 2, 0.f, -1},
                        {"top_ps", 3, kNaN, 0},        {"min_ps", 4, kNaN, 0},
                        {"min_ps", 4, -0.25f, 0}};
  for (const Case& c : cases) {
    for (int32_t bad_r : {0, 2, R - 1}) {
      INFO(c.name << " request " << bad_r);
      std::vector<float> temps(R, 1.f), gs(R, 0.f), ps(R, 1.f), mps(R, 0.f);
      std::vector<int32_t> ks(R, 0);
      if (c.which == 0) temps[bad_r] = c.f;
      if (c.which == 1) gs[bad_r] = c.f;
      if (c.which == 2) ks[bad_r] = c.k;
      if (c.which == 3) ps[bad_r] = c.f;
      if (c.which == 4) mps[bad_r] = c.f;
      dds_sample_args a = basic_args(logits, R);
      a.temperatures = temps.data();
      a.guidance_scales = gs.data();
      a.top_ks = ks.data();
      a.top_ps = ps.data();
      a.min_ps = mps.data();
      Outputs o(R, R, (int64_t)R * V);
      o.attach(&a);
      CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_VALUE);
      const std::string msg = dds_last_error();
      CHECK(contains(msg.c_str(), c.name));
      CHECK(contains(msg.c_str(), ("request " + std::to_string(bad_r)).c_str()));
      CHECK(o.untouched());
    }
  }
  // Out-of-range values that are documented as valid (k > V, p <= 0, p > 1, min_p > 1,
  // denormal T) pass the debug checks.
  std::vector<float> temps(R, 1e-40f), ps = {0.f, -1.f, 2.f, 1.f}, mps = {0.f, 1.f, 5.f, 0.f};
  std::vector<int32_t> ks(R, V + 100);
  dds_sample_args a = basic_args(logits, R);
  a.temperatures = temps.data();
  a.top_ks = ks.data();
  a.top_ps = ps.data();
  a.min_ps = mps.data();
  Outputs o = run_sample(s, a);
  for (int32_t r = 0; r < R; ++r) CHECK(o.status[r] == 0);
}

TEST_CASE("stash with hostile numbers: NaN / +inf logits, empty rows, bad and denormal T") {
  const int32_t V = 6, n = 3, E = n + 1;
  Sampler s(V);
  // Row 0: NaN, +inf, finite; row 1: all -inf / NaN; row 2: huge values.
  const std::vector<float> logits = {kNaN, kInf, 1.f, 2.f, -kInf, 0.f,
                                     -kInf, kNaN, -kInf, kNaN, -kInf, -kInf,
                                     -3e38f, 3e38f, 3e38f, -1e-40f, 1e-40f, 0.f};
  for (float T : {1.f, kNaN, -1.f, kInf, 1e-40f, 0.f, 0.5f}) {
    INFO("T " << T);
    dds_stash_args a = stash_args();
    a.num_rows = 3;
    a.num_requests = 3;
    a.logits = logits.data();
    a.temperatures = nullptr;
    const std::vector<float> temps(3, T);
    a.temperatures = temps.data();
    a.num_top = n;
    a.num_slots = 3;
    a.rows_per_slot = 1;
    std::vector<int32_t> ids(3 * E, kPoisonI), ranks(3 * E, kPoisonI), status(3, kPoisonI);
    std::vector<float> vals(3 * E, kPoisonF);
    a.out_token_ids = ids.data();
    a.out_logprobs = vals.data();
    a.out_ranks = ranks.data();
    a.request_status = status.data();
    const dds_status st = dds_stash_logprobs(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
    const bool bad = std::isnan(T) || T < 0.f || std::isinf(T);
    for (int r = 0; r < 3; ++r) CHECK(status[r] == (bad ? DDS_REQ_BAD_TEMPERATURE : 0));
    for (int e = 0; e < 3 * E; ++e) {
      CHECK(ids[e] >= 0);
      CHECK(ids[e] < V);
      CHECK(!std::isnan(vals[e]));
      CHECK(vals[e] <= 0.f);
      CHECK(ranks[e] >= 0);
      CHECK(ranks[e] <= V);
    }
    // Row 0: the +inf column is the argmax, then 3 (2.0), 2 (1.0).
    CHECK(ids[0] == 1);
    CHECK(ids[1] == 1);
    CHECK(ids[2] == 3);
    CHECK(ids[3] == 2);
    CHECK(ranks[1] == 1);
    // Row 1 has no finite column: entry 0 = (0, -inf, 0) and padding.
    for (int e = 0; e < E; ++e) {
      CHECK(ids[E + e] == 0);
      CHECK(vals[E + e] == -kInf);
      CHECK(ranks[E + e] == 0);
    }
    // Row 2: 3e38 ties (ids 1, 2: lower first, same rank 1).
    CHECK(ids[2 * E + 1] == 1);
    CHECK(ids[2 * E + 2] == 2);
    CHECK(ranks[2 * E + 1] == 1);
    CHECK(ranks[2 * E + 2] == 1);
    if (T == 1.f) CHECK(vals[2 * E + 1] == doctest::Approx(-std::log(2.0)));
  }
}
