// Batch invariance: a request samples identical tokens (and statistics) alone, inside a packed
// batch of other requests, and with only some of its positions packed (using `positions`).
#include "test_util.h"

using namespace tu;

namespace {

struct Request {
  int32_t rows;  // canvas positions 0..rows-1
  std::vector<float> logits, uncond;  // [rows, V]
  float T, g, p, min_p;
  int32_t k;
  uint64_t seed;
  uint32_t step;
};

struct Result {
  std::vector<int32_t> tokens, argmax;
  std::vector<float> logprobs, entropy;
};

// Samples the given (request, position) pairs in one call, requests in the given order, each
// request's selected positions packed contiguously. Returns per request the outputs indexed by
// canvas position (-1 where not sampled).
std::vector<Result> run(const std::vector<Request>& reqs, const std::vector<int>& order,
                        const std::vector<std::vector<int32_t>>& picks, int32_t V,
                        bool use_positions) {
  std::vector<int32_t> offs = {0}, pos, uoffs;
  std::vector<float> lg, ul, T, G, P, MP;
  std::vector<int32_t> K;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
  for (int r : order) {
    const Request& q = reqs[r];
    uoffs.push_back(q.uncond.empty() ? -1 : (int32_t)(ul.size() / V));
    for (int32_t p : picks[r]) {
      lg.insert(lg.end(), q.logits.begin() + (size_t)p * V, q.logits.begin() + (size_t)(p + 1) * V);
      if (!q.uncond.empty())
        ul.insert(ul.end(), q.uncond.begin() + (size_t)p * V, q.uncond.begin() + (size_t)(p + 1) * V);
      pos.push_back(p);
    }
    offs.push_back((int32_t)pos.size());
    T.push_back(q.T), G.push_back(q.g), P.push_back(q.p), MP.push_back(q.min_p);
    K.push_back(q.k), seeds.push_back(q.seed), steps.push_back(q.step);
  }
  const int32_t N = (int32_t)pos.size(), R = (int32_t)order.size();
  Sampler s(V, N, R);
  if (ul.empty()) ul.resize(V);  // a valid pointer even when nobody is guided
  dds_sample_args a = sample_args();
  a.num_rows = N;
  a.num_requests = R;
  a.row_offsets = offs.data();
  a.positions = use_positions ? pos.data() : nullptr;
  a.logits = lg.data();
  a.uncond_logits = ul.data();
  a.uncond_num_rows = (int32_t)(ul.size() / V);
  a.uncond_row_offsets = uoffs.data();
  a.temperatures = T.data();
  a.guidance_scales = G.data();
  a.top_ks = K.data();
  a.top_ps = P.data();
  a.min_ps = MP.data();
  a.seeds = seeds.data();
  a.steps = steps.data();
  Outputs o = run_sample(s, a);
  std::vector<Result> res(reqs.size());
  for (int i = 0; i < R; ++i) {
    const int r = order[i];
    Result& out = res[r];
    out.tokens.assign(reqs[r].rows, -1);
    out.argmax.assign(reqs[r].rows, -1);
    out.logprobs.assign(reqs[r].rows, kNaN);
    out.entropy.assign(reqs[r].rows, kNaN);
    for (int32_t row = offs[i]; row < offs[i + 1]; ++row) {
      const int32_t p = pos[row];
      out.tokens[p] = o.tokens[row];
      out.argmax[p] = o.argmax[row];
      out.logprobs[p] = o.logprobs[row];
      out.entropy[p] = o.entropy[row];
    }
    CHECK(o.status[i] == 0);
  }
  return res;
}

std::vector<int32_t> all(int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

TEST_CASE("a request samples the same tokens alone, in a packed batch, and partially packed") {
  for (int32_t V : {37, 1500}) {
    CAPTURE(V);
    std::mt19937_64 rng(V);
    std::vector<Request> reqs;
    const int32_t rows[5] = {24, 7, 1, 16, 9};
    for (int r = 0; r < 5; ++r) {
      Request q;
      q.rows = rows[r];
      q.logits = random_row(rng, q.rows * V, 2.f);
      if (r % 2 == 0) q.uncond = random_row(rng, q.rows * V, 2.f);
      q.T = r == 3 ? 0.f : 0.6f + 0.3f * r;
      q.g = r % 2 == 0 ? 0.5f * (r + 1) : 0.f;
      q.k = r == 1 ? 5 : 0;
      q.p = r == 2 ? 0.8f : 1.f;
      q.min_p = r == 4 ? 0.05f : 0.f;
      q.seed = rng();
      q.step = (uint32_t)(rng() % 100);
      reqs.push_back(q);
    }
    std::vector<std::vector<int32_t>> full(5);
    for (int r = 0; r < 5; ++r) full[r] = all(rows[r]);
    // Each request alone, rows in canvas order, default positions (row index).
    std::vector<Result> alone(5);
    for (int r = 0; r < 5; ++r) alone[r] = run(reqs, {r}, full, V, false)[r];
    // All requests packed, in two different orders; positions NULL and given (same values).
    const auto packed = run(reqs, {0, 1, 2, 3, 4}, full, V, false);
    const auto shuffled = run(reqs, {3, 0, 4, 2, 1}, full, V, true);
    // Only some positions of each request (the still-masked ones), packed, with positions.
    std::vector<std::vector<int32_t>> part(5);
    for (int r = 0; r < 5; ++r)
      for (int32_t p = 0; p < rows[r]; ++p)
        if (rng() % 3 != 0 || p == rows[r] - 1) part[r].push_back(p);
    std::shuffle(part[0].begin(), part[0].end(), rng);  // any row order within a request
    const auto partial = run(reqs, {4, 1, 0, 3, 2}, part, V, true);
    for (int r = 0; r < 5; ++r) {
      CAPTURE(r);
      CHECK(packed[r].tokens == alone[r].tokens);
      CHECK(packed[r].logprobs == alone[r].logprobs);
      CHECK(packed[r].entropy == alone[r].entropy);
      CHECK(shuffled[r].tokens == alone[r].tokens);
      CHECK(shuffled[r].argmax == alone[r].argmax);
      for (int32_t p : part[r]) {
        CAPTURE(p);
        CHECK(partial[r].tokens[p] == alone[r].tokens[p]);
        CHECK(partial[r].logprobs[p] == alone[r].logprobs[p]);
      }
    }
    // Sanity: the draws do depend on the position, step and seed.
    int differ = 0;
    for (int32_t p = 1; p < rows[0]; ++p) differ += alone[0].tokens[p] != alone[0].tokens[0];
    CHECK(differ > 0);
    std::vector<Request> other = reqs;
    other[0].step += 1;
    const auto stepped = run(other, {0}, full, V, false);
    CHECK(stepped[0].tokens != alone[0].tokens);
    other = reqs;
    other[0].seed ^= 1;
    CHECK(run(other, {0}, full, V, false)[0].tokens != alone[0].tokens);
  }
}

TEST_CASE("row_offsets NULL (one row per request) equals explicit offsets") {
  const int32_t V = 50, N = 12;
  std::mt19937_64 rng(3);
  const auto lg = random_row(rng, N * V, 2.f);
  Sampler s(V, N, N);
  dds_sample_args a = sample_args();
  a.num_rows = N;
  a.num_requests = N;
  a.logits = lg.data();
  a.seed = 8;
  Outputs o1 = run_sample(s, a);
  std::vector<int32_t> offs(N + 1);
  std::iota(offs.begin(), offs.end(), 0);
  a.row_offsets = offs.data();
  Outputs o2 = run_sample(s, a);
  CHECK(o1.tokens == o2.tokens);
  CHECK(o1.entropy == o2.entropy);
  // One request of N rows samples differently (positions 0..N-1 instead of 0 each).
  const int32_t one[2] = {0, N};
  a.row_offsets = one;
  a.num_requests = 1;
  Outputs o3 = run_sample(s, a);
  CHECK(o3.tokens[0] == o1.tokens[0]);  // row 0 has position 0 both times
  CHECK(o3.tokens != o1.tokens);
}
