// Properties on random rows: probabilities sum to 1, logprob(token) = log(probs[token]),
// entropy / confidence / margin / probs agree with a long-double direct computation of the
// spec's distribution, the token lies in the support, and processed vs guided statistics relate
// as documented.
#include "test_util.h"

using namespace tu;

namespace {

struct Config {
  int32_t V;
  float T, g, p, min_p;
  int32_t k;
  float sigma;
  float inf_frac;  // share of -inf columns
};

void check_config(const Config& cf, std::mt19937_64& rng) {
  CAPTURE(cf.V);
  CAPTURE(cf.T);
  CAPTURE(cf.k);
  CAPTURE(cf.p);
  CAPTURE(cf.min_p);
  CAPTURE(cf.g);
  const int32_t V = cf.V, N = 40;
  std::vector<float> c = random_row(rng, N * V, cf.sigma), u = random_row(rng, N * V, cf.sigma);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  for (int i = 0; i < N; ++i) {
    int32_t finite = 0;
    for (int t = 0; t < V; ++t) {
      if (U(rng) < cf.inf_frac) c[i * V + t] = -kInf;
      if (U(rng) < cf.inf_frac / 4) u[i * V + t] = -kInf;
      finite += c[i * V + t] > -kInf && u[i * V + t] > -kInf;
    }
    if (finite == 0) c[i * V] = u[i * V] = 0.f;  // keep every row non-empty
  }
  Sampler s(V, N, 1);
  for (int32_t stats : {DDS_STATS_PROCESSED, DDS_STATS_GUIDED}) {
    CAPTURE(stats);
    dds_sample_args a = sample_args();
    const int32_t offs[2] = {0, N};
    a.num_rows = N;
    a.num_requests = 1;
    a.row_offsets = offs;
    a.logits = c.data();
    a.uncond_logits = u.data();
    a.uncond_num_rows = N;
    a.guidance_scale = cf.g;
    a.temperature = cf.T;
    a.top_k = cf.k;
    a.top_p = cf.p;
    a.min_p = cf.min_p;
    a.seed = rng();
    a.step = 3;
    a.stats = stats;
    Outputs o = run_sample_probs(s, a, V);
    CHECK(o.status[0] == 0);
    bool ok = true;
    for (int i = 0; i < N; ++i) {
      // l per §2, independently.
      std::vector<float> l(V);
      for (int t = 0; t < V; ++t) {
        const float cc = c[i * V + t], uu = u[i * V + t];
        float v = cf.g == 0.f ? cc : (cc == -kInf || uu == -kInf) ? -kInf : std::fmaf(cf.g, cc - uu, cc);
        if (std::isnan(v)) v = -kInf;
        if (v == kInf) v = FLT_MAX;
        l[t] = v;
      }
      int32_t amax = -1;
      for (int t = 0; t < V; ++t)
        if (l[t] > -kInf && (amax < 0 || l[t] > l[amax])) amax = t;
      std::vector<long double> D;
      const bool greedy = cf.T == 0.f;
      if (stats == DDS_STATS_GUIDED) {
        D = ref_softmax(l);
      } else if (greedy) {
        D.assign(V, 0.0L);
        D[amax] = 1;
      } else {
        RefParams q;
        q.T = cf.T, q.k = cf.k, q.p = cf.p, q.min_p = cf.min_p;
        D = ref_processed(l, q);
      }
      const int32_t tok = o.tokens[i];
      const float* pr = &o.probs[(size_t)i * V];
      double sum = 0;
      for (int t = 0; t < V; ++t) sum += pr[t];
      std::vector<long double> sorted = D;
      std::sort(sorted.begin(), sorted.end(), std::greater<long double>());
      const long double p1 = sorted[0], p2 = V > 1 ? sorted[1] : 0.0L;
      const bool row_ok =
          tok >= 0 && tok < V && o.argmax[i] == amax && std::fabs(sum - 1.0) < 1e-5 &&
          pr[tok] > 0 &&
          // the token is in the processed support (whatever the stats mode)
          (greedy ? tok == amax : true) &&
          std::fabs(o.logprobs[i] - std::log((double)pr[tok])) <
              2e-6 * std::fabs(o.logprobs[i]) + 2e-6 &&
          std::fabs(o.logprobs[i] - (double)std::log(D[tok])) <
              1e-6 * std::fabs((double)std::log(D[tok])) + 1e-6 &&
          std::fabs(o.entropy[i] - (double)ref_entropy(D)) <
              1e-6 * (double)ref_entropy(D) + 1e-6 &&
          std::fabs(o.confidence[i] - (double)p1) < 1e-6 * (double)p1 + 1e-7 &&
          std::fabs(o.margin[i] - (double)(p1 - p2)) < 2e-6 &&
          [&] {
            for (int t = 0; t < V; ++t) {
              if (D[t] == 0 && pr[t] != 0) return false;
              if (std::fabs(pr[t] - (double)D[t]) > 2e-6 * (double)D[t] + 1e-9) return false;
            }
            return true;
          }();
      if (!row_ok) {
        CAPTURE(i);
        CAPTURE(tok);
        CHECK(o.argmax[i] == amax);
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
        CHECK(o.logprobs[i] == doctest::Approx((double)std::log(D[tok])));
        CHECK(o.entropy[i] == doctest::Approx((double)ref_entropy(D)));
        CHECK(o.confidence[i] == doctest::Approx((double)p1));
        CHECK(o.margin[i] == doctest::Approx((double)(p1 - p2)));
      }
      ok = ok && row_ok;
    }
    CHECK(ok);
  }
}

}  // namespace

TEST_CASE("properties of the outputs on random rows, both stats modes") {
  std::mt19937_64 rng(123);
  const std::vector<Config> configs = {
      {1, 1.f, 0.f, 1.f, 0.f, 0, 1.f, 0.f},      {5, 1.f, 0.f, 1.f, 0.f, 0, 2.f, 0.2f},
      {64, 0.7f, 0.f, 1.f, 0.f, 0, 3.f, 0.1f},   {64, 1.3f, 1.5f, 1.f, 0.f, 0, 2.f, 0.1f},
      {64, 1.f, 0.f, 1.f, 0.f, 10, 2.f, 0.f},    {64, 0.9f, 0.f, 0.85f, 0.f, 0, 2.f, 0.f},
      {64, 1.f, 0.f, 1.f, 0.1f, 0, 2.f, 0.f},    {64, 0.5f, 2.f, 0.9f, 0.02f, 20, 3.f, 0.3f},
      {64, 0.f, 1.f, 1.f, 0.f, 0, 2.f, 0.1f},    {100, 1.f, 0.f, 1.f, 0.f, 0, 0.01f, 0.f},
      {100, 1.f, 0.f, 1.f, 0.f, 0, 40.f, 0.f},   {1025, 1.f, 0.f, 1.f, 0.f, 0, 3.f, 0.5f},
      {3000, 1.2f, 0.5f, 0.95f, 0.f, 500, 2.f, 0.05f},
  };
  for (const Config& cf : configs) check_config(cf, rng);
}

TEST_CASE("processed and guided statistics: equal at T = 1 without filters") {
  std::mt19937_64 rng(5);
  const int32_t V = 200, N = 30;
  const auto c = random_row(rng, N * V, 2.f), u = random_row(rng, N * V, 2.f);
  Sampler s(V, N, N);
  for (float g : {0.f, 1.25f}) {
    dds_sample_args a = sample_args();
    a.num_rows = N;
    a.num_requests = N;
    a.logits = c.data();
    a.uncond_logits = u.data();
    a.uncond_num_rows = N;
    a.guidance_scale = g;
    Outputs pr = run_sample_probs(s, a, V);
    a.stats = DDS_STATS_GUIDED;
    Outputs gu = run_sample_probs(s, a, V);
    CHECK(pr.tokens == gu.tokens);
    CHECK(pr.logprobs == gu.logprobs);
    CHECK(pr.entropy == gu.entropy);
    CHECK(pr.confidence == gu.confidence);
    CHECK(pr.margin == gu.margin);
    CHECK(pr.probs == gu.probs);
    // With a temperature the processed entropy moves, the guided one does not.
    a.temperature = 2.f;
    Outputs g2 = run_sample_probs(s, a, V);
    CHECK(g2.entropy == gu.entropy);
    a.stats = DDS_STATS_PROCESSED;
    Outputs p2 = run_sample_probs(s, a, V);
    for (int i = 0; i < N; ++i) CHECK(p2.entropy[i] > pr.entropy[i]);  // hotter = flatter
    // Filters shrink the processed support: entropy can only drop against the unfiltered row at
    // the same T when top-k 1 keeps one token.
    a.top_k = 1;
    Outputs k1 = run_sample_probs(s, a, V);
    for (int i = 0; i < N; ++i) {
      CHECK(k1.entropy[i] == 0.f);
      CHECK(k1.tokens[i] == k1.argmax[i]);
    }
  }
}
