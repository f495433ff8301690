// DDS_FLAG_DEBUG_CHECKS on the CPU backend: out-of-range per-request values are returned as
// DDS_ERR_INVALID_VALUE naming the array and the request (instead of being sanitised and flagged),
// and nothing is written. Valid values give the same results as without the flag.
#include <functional>

#include "test_util.h"

using namespace tu;

namespace {

constexpr int32_t V = 6, R = 4, N = 4;

struct Call {
  std::vector<float> lg, ul;
  std::vector<float> T = {1.f, 0.5f, 0.f, 2.f}, G = {0.f, 1.f, 0.f, 0.5f}, P = {1.f, .9f, 1.f, .5f},
                     MP = {0.f, 0.f, .1f, 0.f};
  std::vector<int32_t> K = {0, 2, 0, 1}, uoffs = {-1, 0, -1, 2};
  Outputs out{N, R, 0};
  dds_sample_args a;
  Call() : lg(N * V), ul(3 * V) {
    for (int i = 0; i < N * V; ++i) lg[i] = (float)((i * 5) % 7) * 0.5f;
    for (int i = 0; i < 3 * V; ++i) ul[i] = (float)((i * 3) % 5) * 0.5f;
    a = sample_args();
    a.num_rows = N;
    a.num_requests = R;
    a.logits = lg.data();
    a.uncond_logits = ul.data();
    a.uncond_num_rows = 3;
    a.uncond_row_offsets = uoffs.data();
    a.temperatures = T.data();
    a.guidance_scales = G.data();
    a.top_ks = K.data();
    a.top_ps = P.data();
    a.min_ps = MP.data();
    out.attach(&a);
  }
};

}  // namespace

TEST_CASE("debug checks: bad per-request values are errors naming the request") {
  Sampler dbg(V, N, R, 4, DDS_FLAG_DEBUG_CHECKS);
  Sampler plain(V, N, R, 4);
  {
    Call c1, c2;
    REQUIRE(dds_sample(dbg, &c1.a, nullptr) == DDS_OK);
    REQUIRE(dds_sample(plain, &c2.a, nullptr) == DDS_OK);
    CHECK(c1.out.tokens == c2.out.tokens);
    CHECK(c1.out.entropy == c2.out.entropy);
    CHECK(c1.out.status == std::vector<int32_t>(R, 0));
  }
  struct D {
    const char* name;
    const char* needle;
    std::function<void(Call&)> mutate;
    int32_t flag;  // what the non-debug sampler flags instead
  };
  const std::vector<D> cases = {
      {"NaN temperature", "temperatures[2]", [](Call& c) { c.T[2] = kNaN; },
       DDS_REQ_BAD_TEMPERATURE},
      {"negative temperature", "temperatures[0]", [](Call& c) { c.T[0] = -1.f; },
       DDS_REQ_BAD_TEMPERATURE},
      {"infinite temperature", "temperatures[3]", [](Call& c) { c.T[3] = kInf; },
       DDS_REQ_BAD_TEMPERATURE},
      {"NaN guidance", "guidance_scales[1]", [](Call& c) { c.G[1] = kNaN; },
       DDS_REQ_BAD_GUIDANCE},
      {"infinite guidance", "guidance_scales[3]", [](Call& c) { c.G[3] = -kInf; },
       DDS_REQ_BAD_GUIDANCE},
      {"negative top-k", "top_ks[1]", [](Call& c) { c.K[1] = -4; }, DDS_REQ_BAD_TOP_K},
      {"NaN top-p", "top_ps[3]", [](Call& c) { c.P[3] = kNaN; }, DDS_REQ_BAD_TOP_P},
      {"NaN min-p", "min_ps[2]", [](Call& c) { c.MP[2] = kNaN; }, DDS_REQ_BAD_MIN_P},
      {"negative min-p", "min_ps[0]", [](Call& c) { c.MP[0] = -0.25f; }, DDS_REQ_BAD_MIN_P},
      {"uncond rows out of range", "uncond_row_offsets[3]", [](Call& c) { c.uoffs[3] = 3; },
       DDS_REQ_BAD_UNCOND_ROWS},
  };
  for (const D& d : cases) {
    CAPTURE(d.name);
    Call c;
    d.mutate(c);
    const dds_status st = dds_sample(dbg, &c.a, nullptr);
    const std::string msg = dds_last_error();
    CAPTURE(msg);
    CHECK(st == DDS_ERR_INVALID_VALUE);
    CHECK(contains(msg.c_str(), d.needle));
    CHECK(contains(msg.c_str(), "request"));
    CHECK(c.out.untouched());
    // Without the flag: sanitised, flagged, DDS_OK.
    Call p;
    d.mutate(p);
    REQUIRE(dds_sample(plain, &p.a, nullptr) == DDS_OK);
    int32_t flags = 0;
    for (int32_t s : p.out.status) flags |= s;
    CHECK((flags & d.flag) != 0);
  }
  // Bad uncond rows of a request that is not guided (g = 0) are neither flagged nor an error.
  {
    Call d, p;
    d.uoffs[2] = 50;  // request 2 has g = 0
    p.uoffs[2] = 50;
    CHECK(dds_sample(dbg, &d.a, nullptr) == DDS_OK);
    CHECK(dds_sample(plain, &p.a, nullptr) == DDS_OK);
    CHECK(d.out.status == std::vector<int32_t>(R, 0));
    CHECK(p.out.status == std::vector<int32_t>(R, 0));
    CHECK(d.out.tokens == p.out.tokens);
  }
  // Values that are documented as valid (T = 0, T subnormal, p <= 0, p > 1, min_p > 1, k >= V)
  // pass in debug mode.
  Call ok;
  ok.T = {0.f, 1e-40f, 1.f, 1.f};
  ok.P = {-1.f, 2.f, 0.f, 1.f};
  ok.MP = {0.f, 5.f, 0.f, 1.f};
  ok.K = {100, 0, 6, 7};
  CHECK(dds_sample(dbg, &ok.a, nullptr) == DDS_OK);
  CHECK(ok.out.status == std::vector<int32_t>(R, 0));
}

TEST_CASE("debug checks on the stash: bad slots and num_token_ids are errors") {
  Sampler dbg(V, N, R, 4, DDS_FLAG_DEBUG_CHECKS);
  std::vector<float> lg(N * V);
  for (int i = 0; i < N * V; ++i) lg[i] = (float)(i % 5);
  std::vector<int32_t> slots = {0, 1, 2, 3}, ids(R * 2, 1), nids = {1, 2, 0, 2};
  std::vector<float> temps = {1.f, 1.f, 1.f, 1.f};
  auto call = [&](const char* needle, dds_status want) {
    dds_stash_args a = stash_args();
    a.num_rows = N;
    a.num_requests = R;
    a.logits = lg.data();
    a.slots = slots.data();
    a.token_ids = ids.data();
    a.num_token_ids = nids.data();
    a.temperatures = temps.data();
    a.num_top = 2;
    a.num_slots = 4;
    a.rows_per_slot = 1;
    std::vector<int32_t> oid(4 * 3, kPoisonI);
    a.out_token_ids = oid.data();
    const dds_status st = dds_stash_logprobs(dbg, &a, nullptr);
    const std::string msg = dds_last_error();
    CAPTURE(msg);
    CHECK(st == want);
    if (needle) {
      CHECK(contains(msg.c_str(), needle));
      CHECK(contains(msg.c_str(), "request"));
      CHECK(std::all_of(oid.begin(), oid.end(), [](int32_t x) { return x == kPoisonI; }));
    }
  };
  call(nullptr, DDS_OK);
  slots[2] = 4;
  call("slots[2]", DDS_ERR_INVALID_VALUE);
  slots[2] = 2;
  nids[3] = 3;
  call("num_token_ids[3]", DDS_ERR_INVALID_VALUE);
  nids[3] = 2;
  temps[1] = kNaN;
  call("temperatures[1]", DDS_ERR_INVALID_VALUE);
}
