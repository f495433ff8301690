// Decoder primitives on the CPU backend: dds_reveal policies and dds_verify_drafts.
#include <doctest/doctest.h>
#include <dds/dds.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Sampler {
  dds_sampler* s = nullptr;
  explicit Sampler(int V, int max_rows = 4096, int max_requests = 1024) {
    dds_sampler_config c;
    dds_sampler_config_init(&c, sizeof c);
    c.vocab_size = V;
    c.max_rows = max_rows;
    c.max_requests = max_requests;
    REQUIRE(dds_create(&c, &s) == DDS_OK);
  }
  ~Sampler() { dds_destroy(s); }
};

dds_reveal_args reveal_args() {
  dds_reveal_args a;
  dds_reveal_args_init(&a, sizeof a);
  return a;
}

std::vector<int> revealed(const std::vector<uint8_t>& r) {
  std::vector<int> out;
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i]) out.push_back((int)i);
  return out;
}

// Chi-square critical value (Wilson-Hilferty) for dof degrees of freedom at z standard normal.
double chi2_crit(int dof, double z = 4.75 /* ~1e-6 one-sided */) {
  const double k = dof;
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

}  // namespace

TEST_CASE("reveal TOP_N: highest scores, ties by lower position, n > eligible, all ineligible") {
  Sampler s(8);
  // Request 0: rows 0..4, request 1: rows 5..7, request 2: rows 8..9 (none eligible).
  std::vector<int32_t> offs = {0, 5, 8, 10};
  std::vector<float> scores = {0.5f, 0.9f, 0.9f, 0.1f, 0.7f, 0.2f, 0.3f, 0.4f, 0.9f, 0.8f};
  std::vector<uint8_t> elig = {1, 1, 1, 1, 1, 1, 0, 1, 0, 0};
  std::vector<int32_t> counts = {3, 5, 2};
  std::vector<uint8_t> rev(10, 7);
  std::vector<int32_t> nrev(3, -1);
  auto a = reveal_args();
  a.num_rows = 10;
  a.num_requests = 3;
  a.row_offsets = offs.data();
  a.scores = scores.data();
  a.eligible = elig.data();
  a.counts = counts.data();
  a.reveal = rev.data();
  a.num_revealed = nrev.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  // Request 0: 0.9 (pos 1), 0.9 (pos 2), 0.7 (pos 4). Request 1: both eligible rows (5, 7).
  CHECK(revealed(rev) == std::vector<int>{1, 2, 4, 5, 7});
  CHECK(nrev == std::vector<int32_t>{3, 2, 0});
  // Tie at the boundary: n = 1 picks the lower position of the two 0.9s.
  counts = {1, 1, 1};
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(revealed(rev) == std::vector<int>{1, 7});
  // Positions decide ties, not row order.
  std::vector<int32_t> pos = {4, 3, 2, 1, 0, 0, 1, 2, 0, 1};
  a.positions = pos.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(revealed(rev) == std::vector<int>{2, 7});
}

TEST_CASE("reveal TOP_N from steps_left: ceil(eligible / steps_left)") {
  Sampler s(8);
  std::vector<int32_t> offs = {0, 7, 10};
  std::vector<float> scores = {1, 2, 3, 4, 5, 6, 7, 3, 2, 1};
  std::vector<int32_t> steps_left = {3, 0};  // 7/3 -> 3; 0 counts as 1 -> all 3
  std::vector<uint8_t> rev(10);
  auto a = reveal_args();
  a.num_rows = 10;
  a.num_requests = 2;
  a.row_offsets = offs.data();
  a.scores = scores.data();
  a.count = 0;
  a.steps_left = steps_left.data();
  a.reveal = rev.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(revealed(rev) == std::vector<int>{4, 5, 6, 7, 8, 9});
}

TEST_CASE("reveal THRESHOLD: all above tau, at least the best; FACTOR rule; mixed policies") {
  Sampler s(8);
  std::vector<int32_t> offs = {0, 4, 8, 12};
  std::vector<float> scores = {0.95f, 0.5f, 0.92f, 0.1f,   // threshold 0.9 -> rows 0, 2
                               0.3f, 0.6f, 0.2f, 0.1f,     // threshold never reached -> best (5)
                               0.99f, 0.9f, 0.85f, 0.5f};  // factor f=1: n=2 needs >= 1-1/3
  std::vector<int32_t> policies = {DDS_REVEAL_THRESHOLD, DDS_REVEAL_THRESHOLD, DDS_REVEAL_FACTOR};
  std::vector<float> thresholds = {0.9f, 0.9f, 0.f};
  std::vector<float> factors = {1.f, 1.f, 1.f};
  std::vector<uint8_t> rev(12);
  auto a = reveal_args();
  a.num_rows = 12;
  a.num_requests = 3;
  a.row_offsets = offs.data();
  a.scores = scores.data();
  a.policies = policies.data();
  a.thresholds = thresholds.data();
  a.factors = factors.data();
  a.reveal = rev.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  // Factor: sorted 0.99, 0.9, 0.85, 0.5; n=2: 0.9 >= 1-1/3=0.667 yes; n=3: 0.85 >= 0.75 yes;
  // n=4: 0.5 >= 0.8 no -> 3 rows.
  CHECK(revealed(rev) == std::vector<int>{0, 2, 5, 8, 9, 10});
  // A small factor reveals only the best.
  factors[2] = 0.1f;  // n=2 needs >= 0.9667
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(revealed(rev) == std::vector<int>{0, 2, 5, 8});
}

TEST_CASE("reveal RANDOM: n eligible rows, uniform over eligible, deterministic per seed") {
  Sampler s(8, 8192, 2048);
  const int R = 1024, L = 8;
  std::vector<int32_t> offs(R + 1);
  for (int r = 0; r <= R; ++r) offs[r] = r * L;
  std::vector<float> scores(R * L, 0.f);
  std::vector<uint8_t> elig(R * L, 1), rev(R * L);
  for (int r = 0; r < R; ++r) elig[r * L + 3] = 0;  // position 3 never eligible
  std::vector<uint64_t> seeds(R);
  for (int r = 0; r < R; ++r) seeds[r] = 1000 + r;
  auto a = reveal_args();
  a.num_rows = R * L;
  a.num_requests = R;
  a.row_offsets = offs.data();
  a.scores = scores.data();
  a.eligible = elig.data();
  a.policy = DDS_REVEAL_RANDOM;
  a.count = 2;
  a.seeds = seeds.data();
  a.reveal = rev.data();
  std::vector<double> hits(L, 0);
  const int steps = 100;
  for (int st = 0; st < steps; ++st) {
    a.step = (uint32_t)st;
    REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
    for (int r = 0; r < R; ++r) {
      int n = 0;
      for (int j = 0; j < L; ++j) {
        n += rev[r * L + j];
        hits[j] += rev[r * L + j];
      }
      REQUIRE(n == 2);
      REQUIRE(rev[r * L + 3] == 0);
    }
  }
  // Uniform over the 7 eligible positions: expected 2/7 of R*steps each.
  const double expect = 2.0 / 7.0 * R * steps;
  double chi2 = 0;
  for (int j = 0; j < L; ++j)
    if (j != 3) chi2 += (hits[j] - expect) * (hits[j] - expect) / expect;
  CHECK(chi2 < chi2_crit(6));
  // Same seed and step: same choice; another step: a different one somewhere.
  a.step = 5;
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  auto first = rev;
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(first == rev);
  a.step = 6;
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(first != rev);
}

TEST_CASE("reveal writes the canvas and applies the EOS rule") {
  Sampler s(16);
  const int MASK = 15, EOS = 14, L = 6;
  // Request 0 canvas: [3, M, EOS, M, M, M] -> positions after 2 are not eligible.
  // Request 1 canvas: [M, M, M, M, M, M].
  std::vector<int32_t> canvas = {3, MASK, EOS, MASK, MASK, MASK, MASK, MASK, MASK, MASK, MASK, MASK};
  std::vector<int32_t> offs = {0, 4, 7};
  std::vector<int32_t> pos = {1, 3, 4, 5, 0, 1, 2};
  std::vector<float> scores = {0.1f, 0.9f, 0.8f, 0.7f, 0.5f, 0.6f, 0.4f};
  std::vector<int32_t> tokens = {7, 8, 9, 10, 11, EOS, 12};
  std::vector<uint8_t> rev(7);
  std::vector<int32_t> fin(2, -1), status(2, -1);
  auto a = reveal_args();
  a.num_rows = 7;
  a.num_requests = 2;
  a.row_offsets = offs.data();
  a.positions = pos.data();
  a.scores = scores.data();
  a.count = 1;
  a.canvas = canvas.data();
  a.canvas_length = L;
  a.canvas_stride = L;
  a.tokens = tokens.data();
  a.mask_token = MASK;
  a.eos_token = EOS;
  a.reveal = rev.data();
  a.finished = fin.data();
  a.request_status = status.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  // Request 0: only position 1 eligible (score 0.1) -> revealed; canvas [3,7,EOS,...] finished.
  // Request 1: best is row 5 (pos 1, EOS) -> canvas [M, EOS, M...]: position 0 still masked.
  CHECK(revealed(rev) == std::vector<int>{0, 5});
  CHECK(canvas[1] == 7);
  CHECK(canvas[L + 1] == EOS);
  CHECK(fin == std::vector<int32_t>{1, 0});
  CHECK(status == std::vector<int32_t>{0, 0});
  // Next step (the caller marks revealed rows ineligible): request 1 positions after its EOS
  // (position 1) are no longer eligible, so position 0 gets revealed, not position 2.
  std::vector<uint8_t> elig = {0, 1, 1, 1, 1, 0, 1};
  a.eligible = elig.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(rev[4] == 1);
  CHECK(rev[6] == 0);
  CHECK(canvas[L + 0] == 11);
  CHECK(fin[1] == 1);
  // A position outside the canvas is never revealed and flagged.
  pos[4] = 99;
  canvas[L + 0] = MASK;
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(rev[4] == 0);
  CHECK((status[1] & DDS_REQ_BAD_POSITION) != 0);
}

TEST_CASE("reveal bad arguments name the argument") {
  Sampler s(8);
  std::vector<float> scores(4, 0.f);
  std::vector<uint8_t> rev(4, 9);
  auto a = reveal_args();
  a.num_rows = 4;
  a.num_requests = 4;
  a.scores = scores.data();
  a.reveal = rev.data();
  auto expect = [&](dds_status want, const char* name) {
    CHECK(dds_reveal(s.s, &a, nullptr) == want);
    CHECK(std::string(dds_last_error()).find(name) != std::string::npos);
    CHECK(rev == std::vector<uint8_t>(4, 9));
  };
  a.scores = nullptr;
  expect(DDS_ERR_NULL_POINTER, "scores");
  a.scores = scores.data();
  a.policy = 9;
  expect(DDS_ERR_INVALID_ARGUMENT, "policy");
  a.policy = 0;
  a.num_requests = 3;
  expect(DDS_ERR_INVALID_ARGUMENT, "row_offsets");
  a.num_requests = 4;
  a.num_rows = 5000;
  expect(DDS_ERR_CAPACITY, "num_rows");
  a.num_rows = 4;
  std::vector<int32_t> canvas(4);
  a.canvas = canvas.data();
  a.canvas_length = 4;
  expect(DDS_ERR_NULL_POINTER, "tokens");
  a.canvas = nullptr;
  a.factor = NAN;
  expect(DDS_ERR_INVALID_ARGUMENT, "factor");
  CHECK(dds_reveal(nullptr, &a, nullptr) == DDS_ERR_NULL_POINTER);
  a.struct_size = 8;
  expect(DDS_ERR_STRUCT_SIZE, "struct_size");
}

// ------------------------------------------------------------------------------------------
// Speculative verification.
// ------------------------------------------------------------------------------------------
namespace {
std::vector<double> softmax(const std::vector<float>& l) {
  double m = -INFINITY;
  for (float x : l) m = std::max(m, (double)x);
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp((double)l[i] - m);
  for (double& x : p) x /= z;
  return p;
}
}  // namespace

TEST_CASE("verify_drafts: output distributed as sampling from the targets; acceptance = sum min(p,q)") {
  const int V = 6, n = 2, R = 1000, calls = 100;  // 1e5 trials
  Sampler s(V, R * (n + 1), R);
  const std::vector<float> q0 = {2.0f, 0.5f, 0.1f, -1.f, 1.0f, 0.f};
  const std::vector<float> q1 = {0.f, 0.f, 1.5f, 1.5f, -2.f, 0.3f};
  const std::vector<float> p0 = {1.0f, 1.2f, -0.5f, 0.2f, 1.0f, -3.f};
  const std::vector<float> p1 = {0.3f, -1.f, 2.0f, 0.1f, 0.f, 0.7f};
  const std::vector<float> p2 = {-1.f, 0.f, 0.f, 1.f, 2.f, 0.5f};
  const auto Q0 = softmax(q0), Q1 = softmax(q1), P0 = softmax(p0), P1 = softmax(p1),
             P2 = softmax(p2);
  std::vector<float> draft((size_t)R * n * V), target((size_t)R * (n + 1) * V);
  for (int r = 0; r < R; ++r) {
    std::copy(q0.begin(), q0.end(), draft.begin() + ((size_t)r * n + 0) * V);
    std::copy(q1.begin(), q1.end(), draft.begin() + ((size_t)r * n + 1) * V);
    std::copy(p0.begin(), p0.end(), target.begin() + ((size_t)r * (n + 1) + 0) * V);
    std::copy(p1.begin(), p1.end(), target.begin() + ((size_t)r * (n + 1) + 1) * V);
    std::copy(p2.begin(), p2.end(), target.begin() + ((size_t)r * (n + 1) + 2) * V);
  }
  std::mt19937_64 rng(12345);
  auto draw = [&](const std::vector<double>& p) {
    std::discrete_distribution<int> d(p.begin(), p.end());
    return d(rng);
  };
  std::vector<int32_t> drafts((size_t)R * n), acc(R), out((size_t)R * (n + 1));
  std::vector<float> outlp((size_t)R * (n + 1));
  std::vector<uint64_t> seeds(R);
  dds_verify_args a;
  dds_verify_args_init(&a, sizeof a);
  a.num_requests = R;
  a.num_drafts = n;
  a.draft_tokens = drafts.data();
  a.draft_logits = draft.data();
  a.target_logits = target.data();
  a.seeds = seeds.data();
  a.accepted_counts = acc.data();
  a.out_tokens = out.data();
  a.out_logprobs = outlp.data();
  std::vector<double> h0(V, 0), h1(V, 0);
  double n1 = 0, accepted_first = 0;
  for (int c = 0; c < calls; ++c) {
    for (int r = 0; r < R; ++r) {
      seeds[r] = (uint64_t)c * R + r;
      drafts[(size_t)r * n + 0] = draw(Q0);
      drafts[(size_t)r * n + 1] = draw(Q1);
    }
    REQUIRE(dds_verify_drafts(s.s, &a, nullptr) == DDS_OK);
    for (int r = 0; r < R; ++r) {
      const int32_t* o = &out[(size_t)r * (n + 1)];
      REQUIRE(acc[r] >= 0);
      REQUIRE(acc[r] <= n);
      for (int e = 0; e <= n; ++e) REQUIRE((e <= acc[r]) == (o[e] >= 0));
      for (int e = 0; e < acc[r]; ++e) REQUIRE(o[e] == drafts[(size_t)r * n + e]);
      h0[o[0]] += 1;
      if (acc[r] >= 1) {
        accepted_first += 1;
        h1[o[1]] += 1;
        n1 += 1;
      }
      CHECK(std::fabs(outlp[(size_t)r * (n + 1)] - std::log(P0[o[0]])) < 1e-5);
    }
  }
  const double N = (double)R * calls;
  double chi0 = 0, chi1 = 0, overlap = 0;
  for (int t = 0; t < V; ++t) {
    chi0 += (h0[t] - N * P0[t]) * (h0[t] - N * P0[t]) / (N * P0[t]);
    chi1 += (h1[t] - n1 * P1[t]) * (h1[t] - n1 * P1[t]) / (n1 * P1[t]);
    overlap += std::min(P0[t], Q0[t]);
  }
  CHECK(chi0 < chi2_crit(V - 1));
  CHECK(chi1 < chi2_crit(V - 1));
  // Acceptance rate of the first draft = sum_t min(p_t, q_t), within 5 sigma.
  const double sd = std::sqrt(N * overlap * (1 - overlap));
  CHECK(std::fabs(accepted_first - N * overlap) < 5 * sd);
  (void)P2;
}

TEST_CASE("verify_drafts greedy: accept while the draft is the target argmax") {
  const int V = 4, n = 3;
  Sampler s(V);
  std::vector<float> target = {0, 5, 1, 2,  /* argmax 1 */ 3, 0, 0, 0, /* 0 */ 0, 0, 9, 0,
                               /* 2 */ 1, 1, 1, 8 /* 3 */};
  std::vector<float> draft(n * V, 0.f);
  draft[0 * V + 1] = 4;  // q argmax 1
  draft[1 * V + 0] = 4;  // 0
  draft[2 * V + 3] = 4;  // 3 (target says 2): rejected
  std::vector<int32_t> drafts = {1, 0, 3}, acc(1), out(n + 1);
  dds_verify_args a;
  dds_verify_args_init(&a, sizeof a);
  a.num_drafts = n;
  a.draft_tokens = drafts.data();
  a.draft_logits = draft.data();
  a.target_logits = target.data();
  a.temperature = 0.f;
  a.accepted_counts = acc.data();
  a.out_tokens = out.data();
  REQUIRE(dds_verify_drafts(s.s, &a, nullptr) == DDS_OK);
  CHECK(acc[0] == 2);
  CHECK(out == std::vector<int32_t>{1, 0, 2, -1});
  drafts[2] = 2;
  draft[2 * V + 3] = 0;
  draft[2 * V + 2] = 4;
  REQUIRE(dds_verify_drafts(s.s, &a, nullptr) == DDS_OK);
  CHECK(acc[0] == 3);
  CHECK(out == std::vector<int32_t>{1, 0, 2, 3});  // bonus token = argmax of the last target
  // Bad arguments.
  a.out_tokens = nullptr;
  CHECK(dds_verify_drafts(s.s, &a, nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(std::string(dds_last_error()).find("out_tokens") != std::string::npos);
  a.out_tokens = out.data();
  a.num_drafts = -1;
  CHECK(dds_verify_drafts(s.s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(std::string(dds_last_error()).find("num_drafts") != std::string::npos);
}
