// Hand-computed cases of dds_sample on the CPU backend: every output, every filter, guidance,
// bans, -inf columns, empty rows, dtypes and strides, per-request sanitisation.
#include "test_util.h"

using namespace tu;

namespace {

const float kLn1 = 0.f, kLn2 = std::log(2.f), kLn3 = std::log(3.f), kLn4 = std::log(4.f);

// Row with probabilities 0.1, 0.2, 0.3, 0.4 (up to fp32 rounding of the logs).
std::vector<float> row1234() { return {kLn1, kLn2, kLn3, kLn4}; }

bool close(double got, long double want, double rel = 2e-6, double abs = 1e-7) {
  if (std::isinf((double)want)) return got == (double)want;
  return std::fabs(got - (double)want) <= abs + rel * std::fabs((double)want);
}

// Calls dds_sample with `rows` copies of `row` (positions 0..rows-1 of one request) and probs.
struct Run {
  Outputs o;
  int32_t V;
  Run(dds_sampler* s, const std::vector<float>& row, int32_t rows, dds_sample_args a)
      : o(rows, 1, (int64_t)rows * (int64_t)row.size()), V((int32_t)row.size()) {
    static thread_local std::vector<float> lg;
    static thread_local std::vector<int32_t> offs;
    lg.clear();
    for (int i = 0; i < rows; ++i) lg.insert(lg.end(), row.begin(), row.end());
    offs = {0, rows};
    a.num_rows = rows;
    a.num_requests = 1;
    a.row_offsets = offs.data();
    a.logits = lg.data();
    o.attach(&a);
    const dds_status st = dds_sample(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
  }
  float p(int i, int t) const { return o.probs[(size_t)i * V + t]; }
};

// Checks one row's statistics and probs against a long-double distribution.
void check_stats(const Run& r, int i, const std::vector<long double>& D) {
  CAPTURE(i);
  const int32_t tok = r.o.tokens[i];
  REQUIRE(tok >= 0);
  REQUIRE(tok < r.V);
  CHECK(D[tok] > 0);
  std::vector<long double> s = D;
  std::sort(s.begin(), s.end(), std::greater<long double>());
  const long double p1 = s[0], p2 = s.size() > 1 ? s[1] : 0.0L;
  CHECK(close(r.o.logprobs[i], std::log(D[tok])));
  CHECK(close(r.o.confidence[i], p1));
  CHECK(close(r.o.margin[i], p1 - p2, 2e-6, 2e-7));
  CHECK(close(r.o.entropy[i], ref_entropy(D), 2e-6, 2e-7));
  for (int t = 0; t < r.V; ++t) {
    CAPTURE(t);
    if (D[t] == 0)
      CHECK(r.p(i, t) == 0.f);
    else
      CHECK(close(r.p(i, t), D[t]));
  }
}

std::vector<long double> onehot(int V, int t) {
  std::vector<long double> d(V, 0.0L);
  d[t] = 1;
  return d;
}

}  // namespace

TEST_CASE("plain sampling, T = 1: probabilities 0.1 0.2 0.3 0.4") {
  Sampler s(4);
  Run r(s, row1234(), 64, sample_args());
  const std::vector<long double> D = {0.1L, 0.2L, 0.3L, 0.4L};
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 64; ++i) {
    check_stats(r, i, D);
    CHECK(r.o.argmax[i] == 3);
    CHECK(close(r.o.confidence[i], 0.4L));
    CHECK(close(r.o.margin[i], 0.1L));
    CHECK(close(r.o.entropy[i], 1.2798542258336676L));
    ++seen[r.o.tokens[i]];
  }
  for (int t = 0; t < 4; ++t) CHECK(seen[t] > 0);  // all four occur in 64 draws
  CHECK(r.o.status[0] == 0);
}

TEST_CASE("T = 0 is greedy: argmax with ties to the lower id; processed stats one-hot") {
  Sampler s(5);
  const std::vector<float> row = {1.f, 3.f, -kInf, 3.f, 2.f};
  dds_sample_args a = sample_args();
  a.temperature = 0.f;
  Run r(s, row, 8, a);
  for (int i = 0; i < 8; ++i) {
    CHECK(r.o.tokens[i] == 1);
    CHECK(r.o.argmax[i] == 1);
    check_stats(r, i, onehot(5, 1));
    CHECK(r.o.logprobs[i] == 0.f);
    CHECK(r.o.confidence[i] == 1.f);
    CHECK(r.o.margin[i] == 1.f);
    CHECK(r.o.entropy[i] == 0.f);
  }
  // Guided stats under greedy: softmax of l (temperature 1), two tokens tie at the top.
  a.stats = DDS_STATS_GUIDED;
  Run g(s, row, 2, a);
  const std::vector<long double> D = ref_softmax(row);
  for (int i = 0; i < 2; ++i) {
    CHECK(g.o.tokens[i] == 1);
    check_stats(g, i, D);
    CHECK(g.o.margin[i] == 0.f);  // p1 == p2
  }
  // A subnormal temperature (1/T overflows) is greedy too, without a flag.
  a.stats = DDS_STATS_PROCESSED;
  a.temperature = 1e-40f;
  Run d(s, row, 4, a);
  for (int i = 0; i < 4; ++i) CHECK(d.o.tokens[i] == 1);
  CHECK(d.o.status[0] == 0);
}

TEST_CASE("temperature scales the processed distribution, not the guided one") {
  Sampler s(4);
  dds_sample_args a = sample_args();
  a.temperature = 0.5f;  // p ~ {1, 4, 9, 16} / 30
  Run r(s, row1234(), 32, a);
  RefParams q;
  q.T = 0.5f;
  const auto D = ref_processed(row1234(), q);
  CHECK(close((double)D[3], 16.0L / 30, 1e-6));
  for (int i = 0; i < 32; ++i) check_stats(r, i, D);
  a.stats = DDS_STATS_GUIDED;
  Run g(s, row1234(), 32, a);
  for (int i = 0; i < 32; ++i) {
    check_stats(g, i, {0.1L, 0.2L, 0.3L, 0.4L});
    CHECK(g.o.tokens[i] == r.o.tokens[i]);  // the sample does not depend on the stats mode
  }
}

TEST_CASE("top-k: k = 1, k = 2, k >= V, ties at the boundary to the lower id") {
  Sampler s(4);
  SUBCASE("k = 1 is the argmax") {
    dds_sample_args a = sample_args();
    a.top_k = 1;
    Run r(s, row1234(), 32, a);
    for (int i = 0; i < 32; ++i) {
      CHECK(r.o.tokens[i] == 3);
      check_stats(r, i, onehot(4, 3));
      CHECK(r.o.margin[i] == 1.f);
    }
  }
  SUBCASE("k = 2 keeps {3, 2}: 4/7 and 3/7") {
    dds_sample_args a = sample_args();
    a.top_k = 2;
    Run r(s, row1234(), 64, a);
    for (int i = 0; i < 64; ++i) {
      CHECK((r.o.tokens[i] == 2 || r.o.tokens[i] == 3));
      check_stats(r, i, {0, 0, 3.0L / 7, 4.0L / 7});
      CHECK(close(r.o.margin[i], 1.0L / 7));
    }
  }
  SUBCASE("k >= V is off") {
    dds_sample_args a = sample_args();
    a.seed = 77;
    Run off(s, row1234(), 64, a);
    for (int k : {4, 5, 1000000}) {
      a.top_k = k;
      Run r(s, row1234(), 64, a);
      CHECK(r.o.tokens == off.o.tokens);
      CHECK(r.o.probs == off.o.probs);
      CHECK(r.o.entropy == off.o.entropy);
    }
  }
  SUBCASE("k counts finite columns only") {
    // 2 finite columns, k = 2 is off (|K0| = 2).
    dds_sample_args a = sample_args();
    a.top_k = 2;
    Run r(s, {0.f, -kInf, kLn3, -kInf}, 16, a);
    for (int i = 0; i < 16; ++i) check_stats(r, i, {0.25L, 0, 0.75L, 0});
  }
  SUBCASE("ties at the boundary go to the lower id") {
    // Values 2, 1, 2, 1, 2: k = 2 keeps tokens 0 and 2 (not 4).
    Sampler s5(5);
    dds_sample_args a = sample_args();
    a.top_k = 2;
    Run r(s5, {2.f, 1.f, 2.f, 1.f, 2.f}, 64, a);
    for (int i = 0; i < 64; ++i) {
      check_stats(r, i, {0.5L, 0, 0.5L, 0, 0});
      CHECK(r.o.margin[i] == 0.f);
    }
    a.top_k = 4;  // keeps 0, 2, 4 and the lower of the 1s: token 1
    Run r4(s5, {2.f, 1.f, 2.f, 1.f, 2.f}, 8, a);
    const long double e = std::exp(-1.0L), Z = 3 + e;
    for (int i = 0; i < 8; ++i) check_stats(r4, i, {1 / Z, e / Z, 1 / Z, 0, 1 / Z});
  }
}

TEST_CASE("top-p: tiny p, p <= 0, p = 1, and the 'mass before' rule") {
  Sampler s(4);
  dds_sample_args a = sample_args();
  for (float p : {1e-6f, 0.f, -3.f, -kInf}) {
    CAPTURE(p);
    a.top_p = p;
    Run r(s, row1234(), 16, a);
    for (int i = 0; i < 16; ++i) {
      CHECK(r.o.tokens[i] == 3);
      check_stats(r, i, onehot(4, 3));
    }
    CHECK(r.o.status[0] == 0);
  }
  a.seed = 5;
  a.top_p = 1.f;
  Run one(s, row1234(), 64, a);
  a.top_p = 2.f;  // > 1 is off as well
  Run two(s, row1234(), 64, a);
  for (int i = 0; i < 64; ++i) check_stats(one, i, {0.1L, 0.2L, 0.3L, 0.4L});
  CHECK(one.o.tokens == two.o.tokens);
  // p = 0.5: mass before token 3 is 0 < 0.5, before token 2 is 0.4 < 0.5, before 1 is 0.7.
  a.top_p = 0.5f;
  Run h(s, row1234(), 64, a);
  for (int i = 0; i < 64; ++i) check_stats(h, i, {0, 0, 3.0L / 7, 4.0L / 7});
  // p = 0.75: 0.7 < 0.75 keeps token 1 too.
  a.top_p = 0.75f;
  Run t(s, row1234(), 64, a);
  for (int i = 0; i < 64; ++i) check_stats(t, i, {0, 2.0L / 9, 3.0L / 9, 4.0L / 9});
  // top-k then top-p: k = 2 renormalises to {4/7, 3/7}; p = 0.5 then keeps only token 3.
  a.top_k = 2;
  a.top_p = 0.5f;
  Run kp(s, row1234(), 16, a);
  for (int i = 0; i < 16; ++i) check_stats(kp, i, onehot(4, 3));
}

TEST_CASE("min-p: relative to the most likely token, after top-k and top-p") {
  Sampler s(4);
  dds_sample_args a = sample_args();
  a.min_p = 0.6f;  // e = p / 0.4 = {0.25, 0.5, 0.75, 1}: keeps {2, 3}
  Run r(s, row1234(), 64, a);
  for (int i = 0; i < 64; ++i) check_stats(r, i, {0, 0, 3.0L / 7, 4.0L / 7});
  a.min_p = 0.3f;  // keeps {1, 2, 3}
  Run r3(s, row1234(), 64, a);
  for (int i = 0; i < 64; ++i) check_stats(r3, i, {0, 2.0L / 9, 3.0L / 9, 4.0L / 9});
  a.min_p = 7.f;  // > 1 is taken as 1: only the maximum
  Run r1(s, row1234(), 16, a);
  for (int i = 0; i < 16; ++i) check_stats(r1, i, onehot(4, 3));
  CHECK(r1.o.status[0] == 0);
  a.min_p = 0.3f;  // with top-p 0.5 first: {3, 2} then min-p keeps both
  a.top_p = 0.5f;
  Run rp(s, row1234(), 16, a);
  for (int i = 0; i < 16; ++i) check_stats(rp, i, {0, 0, 3.0L / 7, 4.0L / 7});
}

TEST_CASE("guidance: g = 0 is off; l = fmaf(g, c - u, c); -inf in c or u stays -inf") {
  Sampler s(4);
  const std::vector<float> c = {1.f, 2.f, 0.5f, -kInf};
  const std::vector<float> u = {0.5f, 2.5f, -kInf, 0.f};
  std::vector<float> cl, ul;
  for (int i = 0; i < 16; ++i) {
    cl.insert(cl.end(), c.begin(), c.end());
    ul.insert(ul.end(), u.begin(), u.end());
  }
  auto call = [&](float g, int32_t stats) {
    Outputs o(16, 1, 16 * 4);
    dds_sample_args a = sample_args();
    const int32_t offs[2] = {0, 16};
    a.num_rows = 16;
    a.num_requests = 1;
    a.row_offsets = offs;
    a.logits = cl.data();
    a.uncond_logits = ul.data();
    a.uncond_num_rows = 16;
    a.guidance_scale = g;
    a.stats = stats;
    a.seed = 3;
    o.attach(&a);
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    return o;
  };
  // g = 0: not guided, -inf in u is ignored.
  Outputs o0 = call(0.f, DDS_STATS_PROCESSED);
  const auto D0 = ref_softmax(c);
  for (int i = 0; i < 16; ++i) {
    CHECK(o0.argmax[i] == 1);
    CHECK(close(o0.logprobs[i], std::log(D0[o0.tokens[i]])));
    CHECK(close(o0.probs[i * 4 + 2], D0[2]));
    CHECK(o0.probs[i * 4 + 3] == 0.f);
  }
  CHECK(o0.status[0] == 0);
  // g = 2: l = {1 + 2 * 0.5, 2 + 2 * -0.5, -inf, -inf} = {2, 1, -inf, -inf}.
  Outputs o2 = call(2.f, DDS_STATS_GUIDED);
  const auto D2 = ref_softmax({2.f, 1.f, -kInf, -kInf});
  for (int i = 0; i < 16; ++i) {
    CHECK(o2.argmax[i] == 0);
    CHECK((o2.tokens[i] == 0 || o2.tokens[i] == 1));
    CHECK(close(o2.logprobs[i], std::log(D2[o2.tokens[i]])));
    CHECK(close(o2.confidence[i], D2[0]));
    CHECK(close(o2.probs[i * 4 + 0], D2[0]));
    CHECK(o2.probs[i * 4 + 2] == 0.f);
    CHECK(o2.probs[i * 4 + 3] == 0.f);
  }
  // Negative g (LLaDA-style "anti" guidance) follows the same formula: l = {0.5, 2.5, -inf, -inf}.
  Outputs om = call(-0.5f, DDS_STATS_GUIDED);
  for (int i = 0; i < 16; ++i) {
    CHECK(om.argmax[i] == 1);
    CHECK(close(om.confidence[i], ref_softmax({0.75f, 2.25f, -kInf, -kInf})[1]));
  }
}

TEST_CASE("guidance uses one fused multiply-add (fmaf), not c + g * (c - u) rounded twice") {
  // Find c, u, g whose fmaf differs from the twice-rounded form; then build a V = 2 row whose
  // column 1 equals the fma result exactly (u1 = c1, so l1 = c1). Under fmaf the two columns tie:
  // probabilities exactly 0.5 / 0.5, argmax 0 and margin 0.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(100.f, 1000.f), G(0.1f, 3.f);
  float c0 = 0, u0 = 0, g = 0, fma = 0;
  bool found = false;
  for (int it = 0; it < 100000 && !found; ++it) {
    c0 = U(rng);
    u0 = U(rng);
    g = G(rng);
    fma = std::fmaf(g, c0 - u0, c0);
    volatile float prod = g * (c0 - u0);
    const float twice = c0 + prod;
    found = twice != fma && std::isfinite(fma);
  }
  REQUIRE(found);
  Sampler s(2);
  const float c[2] = {c0, fma}, u[2] = {u0, fma};
  Outputs o(1, 1, 2);
  dds_sample_args a = sample_args();
  a.num_rows = 1;
  a.num_requests = 1;
  a.logits = c;
  a.uncond_logits = u;
  a.uncond_num_rows = 1;
  a.guidance_scale = g;
  a.stats = DDS_STATS_GUIDED;
  o.attach(&a);
  REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
  CHECK(o.argmax[0] == 0);
  CHECK(o.probs[0] == 0.5f);
  CHECK(o.probs[1] == 0.5f);
  CHECK(o.margin[0] == 0.f);
  CHECK(o.confidence[0] == 0.5f);
}

TEST_CASE("banned token: never sampled, never counted") {
  Sampler s(4);
  dds_sample_args a = sample_args();
  a.banned_token = 3;
  Run r(s, row1234(), 64, a);
  for (int i = 0; i < 64; ++i) {
    CHECK(r.o.tokens[i] != 3);
    CHECK(r.o.argmax[i] == 2);
    check_stats(r, i, {1.0L / 6, 2.0L / 6, 3.0L / 6, 0});
  }
  a.stats = DDS_STATS_GUIDED;
  a.temperature = 0.f;
  Run g(s, row1234(), 4, a);
  for (int i = 0; i < 4; ++i) {
    CHECK(g.o.tokens[i] == 2);
    check_stats(g, i, {1.0L / 6, 2.0L / 6, 3.0L / 6, 0});
  }
}

TEST_CASE("-inf and NaN columns are never sampled; +inf is FLT_MAX") {
  Sampler s(6);
  const float nan = kNaN;
  Run r(s, {kLn1, -kInf, kLn2, nan, kLn3, -kInf}, 64, sample_args());
  for (int i = 0; i < 64; ++i) {
    check_stats(r, i, {1.0L / 6, 0, 2.0L / 6, 0, 3.0L / 6, 0});
    CHECK(std::isfinite(r.o.entropy[i]));
  }
  // Two +inf columns tie at FLT_MAX: each has probability 1/2, the rest 0.
  Run p(s, {1.f, kInf, 0.f, kInf, -kInf, 3.f}, 32, sample_args());
  for (int i = 0; i < 32; ++i) {
    CHECK((p.o.tokens[i] == 1 || p.o.tokens[i] == 3));
    CHECK(p.o.argmax[i] == 1);
    check_stats(p, i, {0, 0.5L, 0, 0.5L, 0, 0});
    CHECK(p.o.margin[i] == 0.f);
  }
}

TEST_CASE("all but one token -inf; V = 1") {
  Sampler s(5);
  dds_sample_args a = sample_args();
  a.top_p = 0.3f;
  a.top_k = 3;
  a.min_p = 0.5f;
  Run r(s, {-kInf, -kInf, -kInf, 4.f, -kInf}, 16, a);
  for (int i = 0; i < 16; ++i) {
    CHECK(r.o.tokens[i] == 3);
    CHECK(r.o.argmax[i] == 3);
    check_stats(r, i, onehot(5, 3));
    CHECK(r.o.logprobs[i] == 0.f);
    CHECK(r.o.confidence[i] == 1.f);
    CHECK(r.o.margin[i] == 1.f);  // p2 = 0: one token
    CHECK(r.o.entropy[i] == 0.f);
  }
  Sampler s1(1);
  for (float T : {0.f, 1.f, 3.f}) {
    dds_sample_args b = sample_args();
    b.temperature = T;
    Run v(s1, {-2.5f}, 8, b);
    for (int i = 0; i < 8; ++i) {
      CHECK(v.o.tokens[i] == 0);
      CHECK(v.o.argmax[i] == 0);
      check_stats(v, i, {1.0L});
    }
  }
}

TEST_CASE("empty rows: token 0, argmax 0, logprob -inf, zeros, DDS_REQ_EMPTY_ROW") {
  Sampler s(3);
  const float nan = kNaN;
  // Request 0: rows {all -inf}, {finite}; request 1: {NaN, -inf, banned}; request 2: finite.
  std::vector<float> lg = {-kInf, -kInf, -kInf, 0.f, 1.f, -1.f, nan, -kInf, 5.f, 1.f, 2.f, 3.f};
  const int32_t offs[4] = {0, 2, 3, 4};
  dds_sample_args a = sample_args();
  a.num_rows = 4;
  a.num_requests = 3;
  a.row_offsets = offs;
  a.logits = lg.data();
  a.banned_token = 2;
  Outputs o(4, 3, 12);
  o.attach(&a);
  REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
  for (int i : {0, 2}) {
    CAPTURE(i);
    CHECK(o.tokens[i] == 0);
    CHECK(o.argmax[i] == 0);
    CHECK(o.logprobs[i] == -kInf);
    CHECK(o.confidence[i] == 0.f);
    CHECK(o.margin[i] == 0.f);
    CHECK(o.entropy[i] == 0.f);
    for (int t = 0; t < 3; ++t) CHECK(o.probs[i * 3 + t] == 0.f);
  }
  CHECK(o.status[0] == DDS_REQ_EMPTY_ROW);
  CHECK(o.status[1] == DDS_REQ_EMPTY_ROW);
  CHECK(o.status[2] == 0);
  CHECK(o.argmax[1] == 1);
  CHECK(o.argmax[3] == 1);  // column 2 (3.0) is banned
  CHECK((o.tokens[1] == 0 || o.tokens[1] == 1));
  // V = 1 with the only token banned.
  Sampler s1(1);
  dds_sample_args b = sample_args();
  const float one = 1.f;
  b.num_rows = 1;
  b.logits = &one;
  b.banned_token = 0;
  Outputs ob(1, 1, 1);
  ob.attach(&b);
  REQUIRE(dds_sample(s1, &b, nullptr) == DDS_OK);
  CHECK(ob.tokens[0] == 0);
  CHECK(ob.logprobs[0] == -kInf);
  CHECK(ob.probs[0] == 0.f);
  CHECK(ob.status[0] == DDS_REQ_EMPTY_ROW);
}

TEST_CASE("processed vs guided statistics with temperature and filters") {
  Sampler s(6);
  const std::vector<float> row = {0.3f, -1.2f, 2.0f, 1.1f, 0.7f, -0.4f};
  dds_sample_args a = sample_args();
  a.temperature = 1.7f;
  a.top_k = 4;
  a.top_p = 0.9f;
  a.seed = 1234;
  Run pr(s, row, 64, a);
  RefParams q;
  q.T = 1.7f;
  q.k = 4;
  q.p = 0.9f;
  const auto Dp = ref_processed(row, q);
  a.stats = DDS_STATS_GUIDED;
  Run gu(s, row, 64, a);
  const auto Dg = ref_softmax(row);
  for (int i = 0; i < 64; ++i) {
    check_stats(pr, i, Dp);
    check_stats(gu, i, Dg);
    CHECK(pr.o.tokens[i] == gu.o.tokens[i]);
    CHECK(pr.o.argmax[i] == 2);
    CHECK(gu.o.argmax[i] == 2);
  }
  // T = 1 and no filters: the two modes agree exactly.
  dds_sample_args b = sample_args();
  Run p1(s, row, 32, b);
  b.stats = DDS_STATS_GUIDED;
  Run g1(s, row, 32, b);
  CHECK(p1.o.logprobs == g1.o.logprobs);
  CHECK(p1.o.entropy == g1.o.entropy);
  CHECK(p1.o.confidence == g1.o.confidence);
  CHECK(p1.o.margin == g1.o.margin);
  CHECK(p1.o.probs == g1.o.probs);
}

TEST_CASE("probs in f32, bf16 and f16 with a row stride; padding untouched") {
  const int32_t V = 5, N = 3;
  const int64_t stride = 8;
  Sampler s(V);
  const std::vector<float> row = {0.5f, -3.f, 1.25f, 0.f, -kInf};
  std::vector<float> lg;
  for (int i = 0; i < N; ++i) lg.insert(lg.end(), row.begin(), row.end());
  const auto D = ref_softmax(row);
  for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    CAPTURE(dt);
    std::vector<uint32_t> buf(N * stride, 0xa5a5a5a5u);  // 4 bytes per element at most
    dds_sample_args a = sample_args();
    a.num_rows = N;
    a.num_requests = N;
    a.logits = lg.data();
    a.probs = buf.data();
    a.probs_dtype = dt;
    a.probs_row_stride = stride;
    std::vector<int32_t> tok(N);
    a.tokens = tok.data();
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(buf.data());
    const size_t es = dt == DDS_DTYPE_F32 ? 4 : 2;
    for (int i = 0; i < N; ++i) {
      for (int64_t t = 0; t < stride; ++t) {
        CAPTURE(t);
        const unsigned char* e = bytes + (i * stride + t) * es;
        if (t >= V) {  // padding between rows untouched
          for (size_t b = 0; b < es; ++b) CHECK(e[b] == 0xa5);
          continue;
        }
        const float want32 = (float)D[t];
        if (dt == DDS_DTYPE_F32) {
          float got;
          std::memcpy(&got, e, 4);
          CHECK(close(got, D[t]));
        } else {
          uint16_t h;
          std::memcpy(&h, e, 2);
          const uint16_t want = dt == DDS_DTYPE_BF16 ? dds::f32_to_bf16(want32)
                                                     : dds::f32_to_f16(want32);
          CHECK(std::abs((int)h - (int)want) <= 1);  // nearest-even of the exact value
          const float back = dt == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
          CHECK(close(back, D[t], dt == DDS_DTYPE_BF16 ? 4e-3 : 5e-4, 1e-7));
        }
      }
    }
    // The rest of the buffer past the last row's V columns.
    for (size_t b = ((N - 1) * stride + V) * es; b < buf.size() * 4; ++b) CHECK(bytes[b] == 0xa5);
  }
}

TEST_CASE("bf16 and f16 logits with strides equal f32 logits of the decoded values") {
  const int32_t V = 37, N = 9;
  Sampler s(V);
  std::mt19937_64 rng(5);
  for (int32_t dt : {DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    CAPTURE(dt);
    for (int64_t stride : {(int64_t)V, (int64_t)V + 3}) {
      std::vector<uint16_t> h(N * stride, 0x7fc0);  // NaN in the gaps: must not be read
      std::vector<float> f(N * V);
      for (int i = 0; i < N; ++i)
        for (int t = 0; t < V; ++t) {
          float x = std::normal_distribution<float>(0.f, 3.f)(rng);
          if (t == 4) x = -kInf;
          const uint16_t e = dt == DDS_DTYPE_BF16 ? dds::f32_to_bf16(x) : dds::f32_to_f16(x);
          h[i * stride + t] = e;
          f[i * V + t] = dt == DDS_DTYPE_BF16 ? dds::bf16_to_f32(e) : dds::f16_to_f32(e);
        }
      auto call = [&](const void* lg, int32_t dtype, int64_t st) {
        dds_sample_args a = sample_args();
        a.num_rows = N;
        a.num_requests = N;
        a.logits = lg;
        a.dtype = dtype;
        a.row_stride = st;
        a.seed = 99;
        a.temperature = 0.8f;
        a.top_p = 0.95f;
        return run_sample(s, a);
      };
      Outputs oh = call(h.data(), dt, stride), of = call(f.data(), DDS_DTYPE_F32, 0);
      CHECK(oh.tokens == of.tokens);
      CHECK(oh.argmax == of.argmax);
      CHECK(oh.logprobs == of.logprobs);
      CHECK(oh.entropy == of.entropy);
      CHECK(oh.margin == of.margin);
      CHECK(oh.confidence == of.confidence);
      for (int i = 0; i < N; ++i) CHECK(oh.tokens[i] != 4);
    }
  }
  // f32 logits with a stride: the gaps hold NaN and +inf, never read.
  std::vector<float> g(N * (V + 2), kInf), f(N * V);
  for (int i = 0; i < N; ++i)
    for (int t = 0; t < V; ++t) g[i * (V + 2) + t] = f[i * V + t] = (float)((t * 7 + i) % 11);
  dds_sample_args a = sample_args();
  a.num_rows = N;
  a.num_requests = N;
  a.logits = g.data();
  a.row_stride = V + 2;
  Outputs os = run_sample(s, a);
  a.logits = f.data();
  a.row_stride = 0;
  Outputs od = run_sample(s, a);
  CHECK(os.tokens == od.tokens);
  CHECK(os.entropy == od.entropy);
}

TEST_CASE("per-request parameters: arrays override scalars; sanitisation rules and flags") {
  const int32_t V = 4, R = 12;
  Sampler s(V);
  std::vector<float> lg;
  for (int r = 0; r < R; ++r) {
    auto row = row1234();
    lg.insert(lg.end(), row.begin(), row.end());
  }
  const float nan = kNaN;
  // Request: 0 T NaN, 1 T -1, 2 T +inf, 3 g NaN, 4 g +inf, 5 k -1, 6 p NaN, 7 min_p NaN,
  // 8 min_p -0.5, 9 all good but greedy (T = 0), 10 k = 1 via the array, 11 everything bad.
  std::vector<float> T(R, 1.f), G(R, 0.f), P(R, 1.f), MP(R, 0.f);
  std::vector<int32_t> K(R, 0);
  T[0] = nan, T[1] = -1.f, T[2] = kInf, G[3] = nan, G[4] = -kInf, K[5] = -1, P[6] = nan;
  MP[7] = nan, MP[8] = -0.5f, T[9] = 0.f, K[10] = 1;
  T[11] = nan, G[11] = kInf, K[11] = -5, P[11] = nan, MP[11] = -1.f;
  std::vector<uint64_t> seeds(R, 42);
  std::vector<uint32_t> steps(R, 9);
  dds_sample_args a = sample_args();
  a.num_rows = R;
  a.num_requests = R;
  a.logits = lg.data();
  a.uncond_logits = lg.data();  // same rows: guided requests with g finite would see l = c
  a.uncond_num_rows = R;
  a.temperatures = T.data();
  a.guidance_scales = G.data();
  a.top_ks = K.data();
  a.top_ps = P.data();
  a.min_ps = MP.data();
  a.seeds = seeds.data();
  a.steps = steps.data();
  // Scalars that the arrays must override.
  a.temperature = 0.f;
  a.top_k = 1;
  a.top_p = 0.1f;
  a.min_p = 0.9f;
  a.seed = 1;
  a.step = 2;
  Outputs o = run_sample(s, a);
  const int32_t want[R] = {DDS_REQ_BAD_TEMPERATURE, DDS_REQ_BAD_TEMPERATURE,
                           DDS_REQ_BAD_TEMPERATURE, DDS_REQ_BAD_GUIDANCE,
                           DDS_REQ_BAD_GUIDANCE,    DDS_REQ_BAD_TOP_K,
                           DDS_REQ_BAD_TOP_P,       DDS_REQ_BAD_MIN_P,
                           DDS_REQ_BAD_MIN_P,       0,
                           0,
                           DDS_REQ_BAD_TEMPERATURE | DDS_REQ_BAD_GUIDANCE | DDS_REQ_BAD_TOP_K |
                               DDS_REQ_BAD_TOP_P | DDS_REQ_BAD_MIN_P};
  // The replacement values give the plain T = 1 distribution: same token as a plain call with
  // the same (seed, step, position).
  dds_sample_args b = sample_args();
  b.num_rows = R;
  b.num_requests = R;
  b.logits = lg.data();
  b.seed = 42;
  b.step = 9;
  Outputs plain = run_sample(s, b);
  for (int r = 0; r < R; ++r) {
    CAPTURE(r);
    CHECK(o.status[r] == want[r]);
    if (r == 9 || r == 10) {
      CHECK(o.tokens[r] == 3);
      CHECK(o.logprobs[r] == 0.f);
    } else {
      CHECK(o.tokens[r] == plain.tokens[r]);
      CHECK(o.logprobs[r] == plain.logprobs[r]);
      CHECK(o.entropy[r] == plain.entropy[r]);
    }
  }
}

TEST_CASE("uncond rows outside [0, uncond_num_rows): not guided, DDS_REQ_BAD_UNCOND_ROWS") {
  const int32_t V = 3;
  Sampler s(V);
  // Three requests of 2 rows; uncond has 3 rows. Request 0 -> uncond rows 0..1 (ok),
  // request 1 -> -1 (unguided), request 2 -> 2..3 (out of range).
  std::vector<float> c = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
  std::vector<float> u = {3, 2, 1, 3, 2, 1, 3, 2, 1};
  const int32_t offs[4] = {0, 2, 4, 6}, uoffs[3] = {0, -1, 2};
  dds_sample_args a = sample_args();
  a.num_rows = 6;
  a.num_requests = 3;
  a.row_offsets = offs;
  a.logits = c.data();
  a.uncond_logits = u.data();
  a.uncond_num_rows = 3;
  a.uncond_row_offsets = uoffs;
  a.guidance_scale = 1.f;
  a.temperature = 0.f;
  Outputs o = run_sample(s, a);
  CHECK(o.status[0] == 0);
  CHECK(o.status[1] == 0);
  CHECK(o.status[2] == DDS_REQ_BAD_UNCOND_ROWS);
  // l = c + (c - u) = {-1, 2, 5}: argmax 2 either way, but check the logprob (guided stats).
  a.stats = DDS_STATS_GUIDED;
  Outputs g = run_sample(s, a);
  const auto Dg = ref_softmax({-1.f, 2.f, 5.f}), Dc = ref_softmax({1.f, 2.f, 3.f});
  CHECK(close(g.confidence[0], Dg[2]));
  CHECK(close(g.confidence[1], Dg[2]));
  for (int i = 2; i < 6; ++i) CHECK(close(g.confidence[i], Dc[2]));
}

TEST_CASE("a request with no rows in the middle of a batch; negative positions") {
  const int32_t V = 4;
  Sampler s(V, 8, 8);
  std::vector<float> lg;
  for (int i = 0; i < 3; ++i) {
    auto r = row1234();
    lg.insert(lg.end(), r.begin(), r.end());
  }
  // Requests: 0 -> rows 0-1, 1 -> none, 2 -> row 2. Request 1 is guided with its (empty) uncond
  // rows starting at uncond_num_rows: in range, no flag.
  const int32_t offs[4] = {0, 2, 2, 3}, uoffs[3] = {-1, 3, -1};
  const int32_t pos[3] = {-1, 5, -2147483647 - 1};
  dds_sample_args a = sample_args();
  a.num_rows = 3;
  a.num_requests = 3;
  a.row_offsets = offs;
  a.positions = pos;
  a.logits = lg.data();
  a.uncond_logits = lg.data();
  a.uncond_num_rows = 3;
  a.uncond_row_offsets = uoffs;
  a.guidance_scale = 1.f;
  a.seed = 5;
  Outputs o = run_sample(s, a);
  CHECK(o.status == std::vector<int32_t>{0, 0, 0});
  // Positions are cast to uint32: -1 is 0xffffffff. Same token as a single-row call with
  // position 0xffffffff given as int32 -1.
  for (int i = 0; i < 3; ++i) {
    dds_sample_args b = sample_args();
    b.num_rows = 1;
    b.logits = lg.data();
    b.positions = &pos[i];
    b.seed = 5;
    Outputs ob = run_sample(s, b);
    CHECK(ob.tokens[0] == o.tokens[i]);
  }
}
