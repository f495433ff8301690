// dds_reveal's ENTROPY_BOUND policy (EB-sampler) on the CPU backend, against a brute-force
// reference: hand-made rows (ties, NaN, bound 0, +inf), bad bounds and their status bit, the
// scalar bound's argument check, and random requests.
#include <doctest/doctest.h>
#include <dds/dds.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Sampler {
  dds_sampler* s = nullptr;
  explicit Sampler(int max_rows = 4096) {
    dds_sampler_config c;
    dds_sampler_config_init(&c, sizeof c);
    c.vocab_size = 8;
    c.max_rows = max_rows;
    c.max_requests = max_rows;
    REQUIRE(dds_create(&c, &s) == DDS_OK);
  }
  ~Sampler() { dds_destroy(s); }
};

// Brute force, straight from the definition: eligible rows sorted by (entropy asc with NaN as
// +inf, position asc, row asc); the longest k >= 1 with sum(first k) - max(first k) <= bound over
// the entropies with negatives counted as 0 (long double sums); a NaN or negative bound is 0.
std::vector<uint8_t> reference(const std::vector<float>& ent, const std::vector<uint8_t>& elig,
                               const std::vector<int32_t>& pos, float bound) {
  const int n = (int)ent.size();
  if (std::isnan(bound) || bound < 0) bound = 0;
  std::vector<int> cand;
  for (int i = 0; i < n; ++i)
    if (elig[i]) cand.push_back(i);
  auto e = [&](int i) { return std::isnan(ent[i]) ? (double)kInf : (double)ent[i]; };
  std::sort(cand.begin(), cand.end(), [&](int x, int y) {
    if (e(x) != e(y)) return e(x) < e(y);
    if (pos[x] != pos[y]) return pos[x] < pos[y];
    return x < y;
  });
  int best = cand.empty() ? 0 : 1;
  for (int k = 1; k <= (int)cand.size(); ++k) {
    // sum(first k) - max(first k): the sum of the prefix without one of its maxima (so that
    // an infinite maximum leaves the rest, not inf - inf).
    int arg = 0;
    for (int q = 0; q < k; ++q)
      if (std::max(0.0, e(cand[q])) >= std::max(0.0, e(cand[arg]))) arg = q;
    long double lhs = 0;
    for (int q = 0; q < k; ++q)
      if (q != arg) lhs += std::max(0.0, e(cand[q]));
    if (lhs <= bound) best = k;
  }
  std::vector<uint8_t> out(n, 0);
  for (int q = 0; q < best; ++q) out[cand[q]] = 1;
  return out;
}

struct Call {
  std::vector<int32_t> offs;
  std::vector<float> ent, bounds;
  std::vector<uint8_t> elig;
  std::vector<int32_t> pos;
  std::vector<uint8_t> rev;
  std::vector<int32_t> nrev, status;
  dds_status run(dds_sampler* s, float scalar_bound = 0.1f, bool per_request = true) {
    const int R = (int)offs.size() - 1, N = offs.back();
    rev.assign(N, 7);
    nrev.assign(R, -1);
    status.assign(R, -1);
    dds_reveal_args a;
    dds_reveal_args_init(&a, sizeof a);
    a.num_rows = N;
    a.num_requests = R;
    a.row_offsets = offs.data();
    a.positions = pos.data();
    a.scores = ent.data();
    a.eligible = elig.data();
    a.policy = DDS_REVEAL_ENTROPY_BOUND;
    a.entropy_bounds = per_request ? bounds.data() : nullptr;
    a.entropy_bound = scalar_bound;
    a.reveal = rev.data();
    a.num_revealed = nrev.data();
    a.request_status = status.data();
    return dds_reveal(s, &a, nullptr);
  }
  std::vector<uint8_t> expected(int r, float bound) const {
    const int b = offs[r], e = offs[r + 1];
    return reference(std::vector<float>(ent.begin() + b, ent.begin() + e),
                     std::vector<uint8_t>(elig.begin() + b, elig.begin() + e),
                     std::vector<int32_t>(pos.begin() + b, pos.begin() + e), bound);
  }
  std::vector<uint8_t> got(int r) const {
    return std::vector<uint8_t>(rev.begin() + offs[r], rev.begin() + offs[r + 1]);
  }
};

}  // namespace

TEST_CASE("reveal ENTROPY_BOUND: hand-made requests") {
  Sampler s;
  Call c;
  // r0: 0.3 0.1 0.05 0.5 NaN, bound 0.2 -> 0.05, 0.1, 0.3 (0.05 + 0.1 <= 0.2; + 0.3 is not).
  // r1: four ties at 0.25, bound 0.5 -> three (0.25 + 0.25 = 0.5 <= 0.5), by lower position.
  // r2: 0, 0, 0.1 with bound 0 -> all three (the two zeros sum to 0).
  // r3: all NaN, bound 1 -> one (the lowest position).
  // r4: all NaN, bound +inf -> all.
  // r5: 0.7 0.2, bound 0 -> one (0.2).
  // r6: nothing eligible -> none.
  c.offs = {0, 5, 9, 12, 14, 16, 18, 20};
  c.ent = {0.3f, 0.1f, 0.05f, 0.5f, kNaN, 0.25f, 0.25f, 0.25f, 0.25f, 0.f, 0.f, 0.1f,
           kNaN, kNaN, kNaN, kNaN, 0.7f, 0.2f, 0.1f, 0.1f};
  c.elig.assign(20, 1);
  c.elig[18] = c.elig[19] = 0;
  c.pos = {0, 1, 2, 3, 4, 3, 2, 1, 0, 0, 1, 2, 5, 4, 0, 1, 0, 1, 0, 1};
  c.bounds = {0.2f, 0.5f, 0.f, 1.f, kInf, 0.f, 5.f};
  REQUIRE(c.run(s.s) == DDS_OK);
  CHECK(c.got(0) == std::vector<uint8_t>{1, 1, 1, 0, 0});
  CHECK(c.got(1) == std::vector<uint8_t>{0, 1, 1, 1});  // positions 2, 1, 0
  CHECK(c.got(2) == std::vector<uint8_t>{1, 1, 1});
  CHECK(c.got(3) == std::vector<uint8_t>{0, 1});  // position 4 < 5
  CHECK(c.got(4) == std::vector<uint8_t>{1, 1});
  CHECK(c.got(5) == std::vector<uint8_t>{0, 1});
  CHECK(c.got(6) == std::vector<uint8_t>{0, 0});
  CHECK(c.nrev == std::vector<int32_t>{3, 3, 3, 1, 2, 1, 0});
  CHECK(c.status == std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0});
  for (int r = 0; r < 7; ++r) CHECK(c.got(r) == c.expected(r, c.bounds[r]));
}

TEST_CASE("reveal ENTROPY_BOUND: bad bounds are 0 and flagged; the scalar bound is checked") {
  Sampler s;
  Call c;
  c.offs = {0, 3, 6, 9};
  c.ent = {0.f, 0.2f, 0.f, 0.f, 0.2f, 0.f, 0.3f, 0.1f, 0.2f};
  c.elig.assign(9, 1);
  c.pos = {0, 1, 2, 0, 1, 2, 0, 1, 2};
  c.bounds = {kNaN, -1.f, -kInf};
  REQUIRE(c.run(s.s) == DDS_OK);
  // Bound 0: the zeros and the next one (0 + 0 <= 0).
  CHECK(c.got(0) == std::vector<uint8_t>{1, 1, 1});
  CHECK(c.got(1) == std::vector<uint8_t>{1, 1, 1});
  CHECK(c.got(2) == std::vector<uint8_t>{0, 1, 0});
  for (int r = 0; r < 3; ++r) CHECK(c.status[r] == DDS_REQ_BAD_ENTROPY_BOUND);
  // Scalar default used when entropy_bounds is NULL.
  REQUIRE(c.run(s.s, 0.15f, false) == DDS_OK);
  CHECK(c.got(2) == std::vector<uint8_t>{0, 1, 1});
  CHECK(c.status == std::vector<int32_t>{0, 0, 0});
  for (float bad : {kNaN, -0.5f, -kInf}) {
    CHECK(c.run(s.s, bad, false) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(std::string(dds_last_error()).find("args->entropy_bound") != std::string::npos);
  }
  // A per-request policy of 4 is ENTROPY_BOUND; 5 is unknown (TOP_N, flagged).
  std::vector<int32_t> policies = {DDS_REVEAL_ENTROPY_BOUND, 5, DDS_REVEAL_TOP_N};
  std::vector<uint8_t> rev(9);
  std::vector<int32_t> status(3);
  dds_reveal_args a;
  dds_reveal_args_init(&a, sizeof a);
  CHECK(a.entropy_bound == 0.1f);
  CHECK(a.entropy_bounds == nullptr);
  a.num_rows = 9;
  a.num_requests = 3;
  a.row_offsets = c.offs.data();
  a.scores = c.ent.data();
  a.policies = policies.data();
  a.reveal = rev.data();
  a.request_status = status.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);
  CHECK(std::vector<uint8_t>(rev.begin(), rev.begin() + 3) == std::vector<uint8_t>{1, 1, 1});
  CHECK(status == std::vector<int32_t>{0, DDS_REQ_BAD_POLICY, 0});
  a.policy = 5;
  CHECK(dds_reveal(s.s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(std::string(dds_last_error()).find("args->policy (5)") != std::string::npos);
}

TEST_CASE("reveal ENTROPY_BOUND: random requests against the brute-force reference") {
  Sampler s(8192);
  std::mt19937_64 rng(4242);
  for (int trial = 0; trial < 20; ++trial) {
    Call c;
    const int R = 1 + (int)(rng() % 40);
    c.offs = {0};
    for (int r = 0; r < R; ++r) c.offs.push_back(c.offs.back() + 1 + (int)(rng() % 60));
    const int N = c.offs.back();
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int i = 0; i < N; ++i) {
      float e = u(rng) * 2.f;
      const unsigned kind = rng() % 16;
      if (kind == 0) e = kNaN;
      if (kind == 1) e = -u(rng);                   // not an entropy: counts as 0 in the sums
      if (kind == 2 || kind == 3) e = std::round(e * 8.f) / 8.f;  // exact ties, dyadic sums
      if (kind == 4) e = 0.f;
      c.ent.push_back(e);
      c.elig.push_back(rng() % 5 != 0);
      c.pos.push_back((int32_t)(rng() % 100));
    }
    for (int r = 0; r < R; ++r) {
      const unsigned kind = rng() % 10;
      float b = u(rng) * 3.f;
      if (kind == 0) b = 0.f;
      if (kind == 1) b = std::round(b * 8.f) / 8.f;
      if (kind == 2) b = kInf;
      if (kind == 3) b = kNaN;
      c.bounds.push_back(b);
    }
    REQUIRE(c.run(s.s) == DDS_OK);
    for (int r = 0; r < R; ++r) {
      CAPTURE(trial);
      CAPTURE(r);
      const auto exp = c.expected(r, c.bounds[r]);
      CHECK(c.got(r) == exp);
      CHECK(c.nrev[r] == (int32_t)std::count(exp.begin(), exp.end(), 1));
      CHECK(c.status[r] == (std::isnan(c.bounds[r]) ? DDS_REQ_BAD_ENTROPY_BOUND : 0));
    }
  }
}

TEST_CASE("reveal: a caller built against the struct without the entropy-bound fields") {
  Sampler s;
  const size_t old_size = offsetof(dds_reveal_args, entropy_bounds);
  dds_reveal_args a;
  std::memset(&a, 0xab, sizeof a);
  REQUIRE(dds_reveal_args_init(&a, old_size) == DDS_OK);
  CHECK(dds_reveal_args_init(&a, old_size - 1) == DDS_ERR_STRUCT_SIZE);
  std::vector<float> scores = {0.1f, 0.9f, 0.5f};
  std::vector<uint8_t> rev(3);
  a.num_rows = 3;
  a.num_requests = 1;
  std::vector<int32_t> offs = {0, 3};
  a.row_offsets = offs.data();
  a.scores = scores.data();
  a.reveal = rev.data();
  REQUIRE(dds_reveal(s.s, &a, nullptr) == DDS_OK);  // bytes past old_size (0xab) are not read
  CHECK(rev == std::vector<uint8_t>{0, 1, 0});
}
