// Random numbers (docs/sampling.md §6): Philox4x32-10 known answers, dds's pinned Gumbel values,
// the uniform's exactness and range, and pinned sampled tokens (§4) for small rows.
#include <cinttypes>
#include <cstdio>

#include "test_util.h"

using namespace tu;

namespace {

// Distance in units in the last place between two finite doubles of the same sign.
int64_t ulp_distance(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  if (ia < 0) ia = INT64_MIN - ia;
  if (ib < 0) ib = INT64_MIN - ib;
  return ia > ib ? ia - ib : ib - ia;
}

}  // namespace

TEST_CASE("Philox4x32-10 matches Random123's kat_vectors") {
  struct Kat {
    uint32_t c[4], k[2], out[4];
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const dds::Philox4 r = dds::philox4x32_10(k.c[0], k.c[1], k.c[2], k.c[3], k.k[0], k.k[1]);
    for (int w = 0; w < 4; ++w) CHECK(r.x[w] == k.out[w]);
  }
}

TEST_CASE("random_bits: key = seed halves, counter = (id, pos, step, salt)") {
  // The third KAT, expressed through the dds layout.
  const uint64_t seed = 0x299f31d0a4093822ull;
  const uint64_t bits = dds::random_bits(seed, /*step=*/0x13198a2eu, /*pos=*/0x85a308d3u,
                                         /*id=*/0x243f6a88u, /*salt=*/0x03707344u);
  CHECK(bits == 0x94fdccebd16cfe09ull);
  CHECK(dds::random_bits(0, 0, 0, 0, 0) == 0xe169c58d6627e8d5ull);
  // Salts are the documented ASCII tags.
  CHECK(dds::kSaltBlock == 0x424C4B31u);
  CHECK(dds::kSaltToken == 0x544F4B31u);
  CHECK(dds::kSaltReveal == 0x52564C31u);
  CHECK(dds::kSaltVerify == 0x56524631u);
  CHECK(dds::kBlockSize == 1024);
}

TEST_CASE("IdDraws: random_bits of one (seed, step, position, salt) over ids, bit for bit") {
  std::mt19937_64 g(20261206);
  const uint32_t salts[] = {dds::kSaltToken, dds::kSaltBlock, 0u, ~0u};
  int checked = 0;
  for (int s = 0; s < 2000; ++s) {
    const uint64_t seed = s < 4 ? (s & 1 ? ~0ull : 0ull) : g();
    const uint32_t step = s < 4 ? (s & 2 ? ~0u : 0u) : (uint32_t)g();
    const uint32_t pos = (uint32_t)g(), salt = salts[s & 3];
    const dds::IdDraws d(seed, step, pos, salt);
    const uint32_t ids[] = {0u, 1u, 1023u, 1024u, 262143u, ~0u, (uint32_t)g(), (uint32_t)g()};
    for (uint32_t id : ids) {
      const uint64_t a = d.bits(id), b = dds::random_bits(seed, step, pos, id, salt);
      if (a != b) {
        FAIL_CHECK("IdDraws differs: seed " << seed << " step " << step << " pos " << pos
                                            << " id " << id << " salt " << salt);
        return;
      }
      ++checked;
    }
  }
  CHECK(checked == 16000);
  // The third KAT through the stream.
  CHECK(dds::IdDraws(0x299f31d0a4093822ull, 0x13198a2eu, 0x85a308d3u, 0x03707344u).bits(0x243f6a88u) ==
        0x94fdccebd16cfe09ull);
}

TEST_CASE("uniform: odd multiples of 2^-53, exact, inside (0, 1)") {
  CHECK(dds::bits_to_uniform(0) == 0x1p-53);
  CHECK(dds::bits_to_uniform(~0ull) == 1.0 - 0x1p-53);
  CHECK(dds::bits_to_uniform(1ull << 11) == 0x1p-53 * 1);  // (1 | 1) * 2^-53
  CHECK(dds::bits_to_uniform(2ull << 11) == 0x1p-53 * 3);  // (2 | 1)
  CHECK(dds::bits_to_uniform(0x7ffull) == 0x1p-53);        // low 11 bits ignored
  CHECK(dds::bits_to_uniform(1ull << 63) == 0.5 + 0x1p-53);
  // Exactness: u * 2^53 is an odd integer, and converting back reproduces the bits.
  std::mt19937_64 rng(7);
  bool all_ok = true;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t b = rng();
    const double u = dds::bits_to_uniform(b);
    const double m = u * 0x1p53;
    const uint64_t mi = (uint64_t)m;
    all_ok = all_ok && u > 0.0 && u < 1.0 && m == std::floor(m) && (mi & 1u) == 1u &&
             mi == ((b >> 11) | 1u);
  }
  CHECK(all_ok);
  // Gumbel range: [-3.6038, 36.7368].
  // bits 0 -> u = 2^-53 -> G = -log(-log1p(-2^-53)) = 53 log 2 = 36.7368 (the top);
  // bits ~0 -> u = 1 - 2^-53 -> G = -log(53 log 2) = -3.6038 (the bottom).
  CHECK(dds::bits_to_gumbel(0) == doctest::Approx(36.736800569677101).epsilon(1e-15));
  CHECK(dds::bits_to_gumbel(~0ull) == doctest::Approx(-3.6037789929704576).epsilon(1e-15));
  CHECK(std::isfinite(dds::bits_to_gumbel(0)));
  CHECK(std::isfinite(dds::bits_to_gumbel(~0ull)));
}

// Pinned dds Gumbel values (also listed in docs/sampling.md §6). Generated once from kernels/common/rng.h
// with glibc's log/log1p. bits and u are pinned exactly; G exactly on this platform (glibc's log
// and log1p are correctly rounded in practice), and within 2 ulp as the portable contract.
TEST_CASE("pinned Gumbel values G(seed, step, pos, id, salt)") {
  struct G {
    uint64_t seed;
    uint32_t step, pos, id, salt;
    uint64_t bits;
    double u, g;
  } cases[] = {
      {0x0ull, 0u, 0u, 0u, 0x424C4B31u, 0xc4c7f83c522ab5e6ull, 0x1.898ff078a4557p-1,
       -0x1.8646d25aebc47p-2},  // G = -0.38112953834474123
      {0x0ull, 0u, 0u, 0u, 0x544F4B31u, 0xafe411803ab44f2bull, 0x1.5fc8230075689p-1,
       -0x1.331e48445e193p-3},  // G = -0.14996010264054557
      {0x2aull, 7u, 3u, 5u, 0x544F4B31u, 0x3dfbc579552e03f0ull, 0x1.efde2bcaa9704p-3,
       0x1.486baa53f19f5p+0},  // G = 1.282892842763997
      {0x123456789abcdef0ull, 100u, 65535u, 262143u, 0x544F4B31u, 0xd63202e8fb75297dull,
       0x1.ac6405d1f6ea5p-1, -0x1.306596070927ep-1},  // G = -0.59452504001508522
      {0x1ull, 1u, 1u, 1u, 0x424C4B31u, 0xd08c1d2af0985dd1ull, 0x1.a1183a55e130bp-1,
       -0x1.0b476c67c88e8p-1},  // G = -0.52202929274451737
      {0xffffffffffffffffull, 4294967295u, 4294967295u, 4294967295u, 0x52564C31u,
       0x4ad0642f9ded8092ull, 0x1.2b4190be77b62p-2,
       0x1.0ff41b522fa5bp+0},  // G = 1.0623185229921066
      {0x7e8ull, 3u, 17u, 255u, 0x56524631u, 0xe0bbe7700dde50d8ull, 0x1.c177cee01bbcbp-1,
       -0x1.7c844570d7c12p-1},  // G = -0.74319664957499953
  };
  for (const G& c : cases) {
    CAPTURE(c.seed);
    CAPTURE(c.id);
    const uint64_t bits = dds::random_bits(c.seed, c.step, c.pos, c.id, c.salt);
    CHECK(bits == c.bits);
    CHECK(dds::bits_to_uniform(bits) == c.u);
    const double g = dds::gumbel(c.seed, c.step, c.pos, c.id, c.salt);
    CHECK(ulp_distance(g, c.g) <= 2);
#if defined(__GLIBC__)
    CHECK(g == c.g);
#endif
  }
}

TEST_CASE("Gumbel noise has the standard Gumbel moments") {
  // Mean = Euler-Mascheroni gamma, variance = pi^2 / 6, over 2e5 counters.
  const int n = 200000;
  long double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double g = dds::gumbel(99, 1, (uint32_t)i, 7, dds::kSaltToken);
    s += g;
    s2 += (long double)g * g;
  }
  const double mean = (double)(s / n), var = (double)(s2 / n - (s / n) * (s / n));
  // Standard errors: sd/sqrt(n) = 1.28/447 = 0.0029 for the mean; var of var ~ 0.0127.
  CHECK(std::fabs(mean - 0.5772156649) < 6 * 0.0029);
  CHECK(std::fabs(var - 1.6449340668) < 0.08);
}

namespace {

// Independent re-implementation of docs/sampling.md §4 (no filters, T = 1) on finite rows.
int32_t ref_two_level(const std::vector<float>& a, uint64_t seed, uint32_t step, uint32_t pos) {
  const int32_t V = (int32_t)a.size();
  double m = -INFINITY;
  for (float v : a)
    if (v > -kInf) m = std::max(m, (double)v);
  int32_t bb = -1;
  double best = -INFINITY;
  for (int32_t b = 0; b * dds::kBlockSize < V; ++b) {
    double s = 0;
    bool any = false;
    for (int32_t t = b * dds::kBlockSize; t < std::min(V, (b + 1) * dds::kBlockSize); ++t)
      if (a[t] > -kInf) {
        s += std::exp((double)a[t] - m);
        any = true;
      }
    if (!any) continue;
    const double sc = (std::log(s) + m) + dds::gumbel(seed, step, pos, (uint32_t)b, dds::kSaltBlock);
    if (bb < 0 || sc > best) {
      best = sc;
      bb = b;
    }
  }
  int32_t tok = -1;
  double bv = -INFINITY;
  for (int32_t t = bb * dds::kBlockSize; t < std::min(V, (bb + 1) * dds::kBlockSize); ++t) {
    if (!(a[t] > -kInf)) continue;
    const double v = (double)a[t] + dds::gumbel(seed, step, pos, (uint32_t)t, dds::kSaltToken);
    if (tok < 0 || v > bv) {
      bv = v;
      tok = t;
    }
  }
  return tok;
}

std::vector<float> pinned_row(int32_t V) {
  std::vector<float> r(V);
  if (V == 8) {
    const float v[8] = {0.5f, -1.f, 2.f, 0.f, 1.5f, -0.25f, 1.f, 0.75f};
    std::copy(v, v + 8, r.begin());
  } else {
    for (int32_t t = 0; t < V; ++t) r[t] = (float)(2.0 * std::sin(t * 0.37) - t * 0.001);
  }
  return r;
}

std::vector<int32_t> sample_pinned(int32_t V, uint64_t seed, uint32_t step) {
  Sampler s(V);
  const int32_t N = 16;
  const std::vector<float> row = pinned_row(V);
  std::vector<float> lg;
  for (int i = 0; i < N; ++i) lg.insert(lg.end(), row.begin(), row.end());
  dds_sample_args a = sample_args();
  const int32_t offs[2] = {0, N};
  a.num_rows = N;
  a.num_requests = 1;
  a.row_offsets = offs;
  a.logits = lg.data();
  a.seed = seed;
  a.step = step;
  std::vector<int32_t> tok(N, kPoisonI);
  a.tokens = tok.data();
  REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
  // Row j has position j: matches the independent implementation.
  for (int32_t j = 0; j < N; ++j) CHECK(tok[j] == ref_two_level(row, seed, step, (uint32_t)j));
  return tok;
}

}  // namespace

TEST_CASE("pinned sampled tokens (16 positions of one request)") {
  // Row V = 8: {0.5, -1, 2, 0, 1.5, -0.25, 1, 0.75}; row V = 3000: 2 sin(0.37 t) - 0.001 t
  // (three blocks: the two-level choice). Positions 0..15.
  CHECK(sample_pinned(8, 12345, 3) ==
        std::vector<int32_t>{2, 4, 3, 6, 4, 2, 6, 2, 4, 0, 3, 7, 4, 0, 2, 2});
  CHECK(sample_pinned(8, 0xdeadbeefcafef00dull, 0) ==
        std::vector<int32_t>{5, 0, 6, 7, 2, 2, 0, 2, 2, 0, 2, 4, 2, 2, 4, 0});
  CHECK(sample_pinned(3000, 12345, 3) ==
        std::vector<int32_t>{531, 37, 243, 1941, 922, 582, 860, 107, 990, 772, 667, 702, 2485,
                             1803, 326, 407});
  CHECK(sample_pinned(3000, 0xdeadbeefcafef00dull, 0) ==
        std::vector<int32_t>{226, 1959, 1261, 125, 1190, 91, 1225, 817, 1089, 1175, 802, 2536,
                             1210, 428, 858, 854});
}

TEST_CASE("library tokens equal an independent two-level implementation on random rows") {
  std::mt19937_64 rng(2024);
  for (int32_t V : {1, 7, 1024, 1025, 2500}) {
    CAPTURE(V);
    Sampler s(V);
    const int32_t N = 64;
    std::vector<float> lg;
    for (int i = 0; i < N; ++i) {
      std::vector<float> r = random_row(rng, V, 3.f);
      // Some -inf columns, including a whole block when V > 1024.
      for (int32_t t = 0; t < V; t += 5) r[t] = (V > 1 ? -kInf : r[t]);
      if (V > 2048)
        for (int32_t t = 1024; t < 2048; ++t) r[t] = -kInf;
      lg.insert(lg.end(), r.begin(), r.end());
    }
    std::vector<int32_t> pos(N);
    for (int i = 0; i < N; ++i) pos[i] = (int32_t)(rng() % 100000);
    dds_sample_args a = sample_args();
    const int32_t offs[2] = {0, N};
    a.num_rows = N;
    a.num_requests = 1;
    a.row_offsets = offs;
    a.positions = pos.data();
    a.logits = lg.data();
    a.seed = rng();
    a.step = (uint32_t)rng();
    std::vector<int32_t> tok(N, kPoisonI);
    a.tokens = tok.data();
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    for (int i = 0; i < N; ++i) {
      std::vector<float> r(lg.begin() + (size_t)i * V, lg.begin() + (size_t)(i + 1) * V);
      CHECK(tok[i] == ref_two_level(r, a.seed, a.step, (uint32_t)pos[i]));
    }
  }
}

TEST_CASE("with filters, temperature and guidance: tokens equal the spec computed independently") {
  // The kept set from the test's own §2-§3 implementation (ref_processed), then §4 on it.
  std::mt19937_64 rng(77);
  for (int32_t V : {9, 300, 2100}) {
    CAPTURE(V);
    const int32_t N = 48;
    Sampler s(V, N, N);
    std::vector<float> c, u;
    for (int i = 0; i < N; ++i) {
      std::vector<float> r = random_row(rng, V, 2.5f), q = random_row(rng, V, 2.5f);
      for (int32_t t = 0; t < V; ++t) {
        if (rng() % 8 == 0) r[t] = -kInf;
        if (rng() % 16 == 0) r[t] = std::round(r[t]);  // exact ties
      }
      c.insert(c.end(), r.begin(), r.end());
      u.insert(u.end(), q.begin(), q.end());
    }
    std::vector<float> T(N), G(N), P(N), MP(N);
    std::vector<int32_t> K(N);
    std::vector<uint64_t> seeds(N);
    std::vector<uint32_t> steps(N);
    for (int i = 0; i < N; ++i) {
      T[i] = 0.25f + 0.05f * (float)(rng() % 40);
      G[i] = (rng() % 3 == 0) ? 0.f : 0.1f * (float)(rng() % 30);
      K[i] = (rng() % 2) ? 0 : 1 + (int32_t)(rng() % (V + 2));
      P[i] = (rng() % 2) ? 1.f : 0.05f + 0.01f * (float)(rng() % 95);
      MP[i] = (rng() % 3) ? 0.f : 0.001f * (float)(rng() % 300);
      seeds[i] = rng();
      steps[i] = (uint32_t)rng();
    }
    dds_sample_args a = sample_args();
    a.num_rows = N;
    a.num_requests = N;
    a.logits = c.data();
    a.uncond_logits = u.data();
    a.uncond_num_rows = N;
    a.temperatures = T.data();
    a.guidance_scales = G.data();
    a.top_ks = K.data();
    a.top_ps = P.data();
    a.min_ps = MP.data();
    a.seeds = seeds.data();
    a.steps = steps.data();
    a.banned_token = V / 2;
    std::vector<int32_t> tok(N, kPoisonI);
    a.tokens = tok.data();
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    for (int i = 0; i < N; ++i) {
      CAPTURE(i);
      std::vector<float> l(V);
      for (int32_t t = 0; t < V; ++t) {
        const float cc = c[(size_t)i * V + t], uu = u[(size_t)i * V + t];
        float v = G[i] == 0.f ? cc : (cc == -kInf || uu == -kInf) ? -kInf : std::fmaf(G[i], cc - uu, cc);
        if (t == V / 2 || std::isnan(v)) v = -kInf;
        if (v == kInf) v = FLT_MAX;
        l[t] = v;
      }
      RefParams q;
      q.T = T[i], q.k = K[i], q.p = P[i], q.min_p = MP[i];
      std::vector<char> keep;
      ref_processed(l, q, &keep);
      std::vector<float> x(V, -kInf);
      const float invT = 1.0f / T[i];
      for (int32_t t = 0; t < V; ++t)
        if (keep[t]) x[t] = l[t] * invT;
      CHECK(tok[i] == ref_two_level(x, seeds[i], steps[i], 0));
    }
  }
}
