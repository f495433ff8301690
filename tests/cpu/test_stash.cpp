// dds_stash_logprobs on the CPU backend: layout, every field, top-n ties, own ids, committed
// tokens, logits mode, ranks, padding, num_valid clamping, slots, keep (untouched outputs).
#include "test_util.h"

using namespace tu;

namespace {

bool close(double got, long double want, double rel = 2e-6, double abs = 1e-6) {
  if (std::isinf((double)want)) return got == (double)want;
  return std::fabs(got - (double)want) <= abs + rel * std::fabs((double)want);
}

struct Stash {
  int32_t num_slots, rows_per_slot, num_top;
  std::vector<int32_t> ids, ranks, status;
  std::vector<float> vals;
  Stash(int32_t slots, int32_t rps, int32_t top, int32_t reqs)
      : num_slots(slots),
        rows_per_slot(rps),
        num_top(top),
        ids((size_t)slots * rps * (top + 1), kPoisonI),
        ranks((size_t)slots * rps * (top + 1), kPoisonI),
        status(reqs, kPoisonI),
        vals((size_t)slots * rps * (top + 1), kPoisonF) {}
  size_t idx(int32_t slot, int32_t j, int32_t e) const {
    return ((size_t)slot * rows_per_slot + j) * (num_top + 1) + e;
  }
  int32_t id(int32_t slot, int32_t j, int32_t e) const { return ids[idx(slot, j, e)]; }
  float val(int32_t slot, int32_t j, int32_t e) const { return vals[idx(slot, j, e)]; }
  int32_t rank(int32_t slot, int32_t j, int32_t e) const { return ranks[idx(slot, j, e)]; }
  bool row_untouched(int32_t slot, int32_t j) const {
    for (int32_t e = 0; e <= num_top; ++e)
      if (id(slot, j, e) != kPoisonI || val(slot, j, e) != kPoisonF ||
          rank(slot, j, e) != kPoisonI)
        return false;
    return true;
  }
  void attach(dds_stash_args* a) {
    a->num_slots = num_slots;
    a->rows_per_slot = rows_per_slot;
    a->num_top = num_top;
    a->out_token_ids = ids.data();
    a->out_logprobs = vals.data();
    a->out_ranks = ranks.data();
    a->request_status = status.data();
  }
};

// Reference of one row: tempered values v (NaN -> -inf, +inf -> FLT_MAX), log-softmax over the
// finite columns, rank = 1 + #{v_s > v_t}.
struct RefRow {
  std::vector<float> v;
  long double M = 0, logS = 0;
  int32_t nf = 0, amax = -1;
  RefRow(const std::vector<float>& l, float T) : v(l.size()) {
    if (!(T > 0) || std::isinf(T)) T = 1.f;
    float invT = 1.0f / T;
    if (std::isinf(invT)) invT = 1.f;
    for (size_t t = 0; t < l.size(); ++t) {
      float x = std::isnan(l[t]) ? -kInf : (l[t] == kInf ? FLT_MAX : l[t]);
      x *= invT;
      if (x == kInf) x = FLT_MAX;
      v[t] = x;
      if (x > -kInf) {
        ++nf;
        if (amax < 0 || x > v[amax]) amax = (int32_t)t;
      }
    }
    if (nf) {
      M = v[amax];
      long double Z = 0;
      for (float x : v)
        if (x > -kInf) Z += std::exp((long double)x - M);
      logS = std::log(Z);
    }
  }
  long double logprob(int32_t t) const {
    if (t < 0 || t >= (int32_t)v.size() || v[t] == -kInf) return -INFINITY;
    return ((long double)v[t] - M) - logS;
  }
  int32_t rank(int32_t t) const {
    if (t < 0 || t >= (int32_t)v.size()) return 0;
    int32_t r = 1;
    for (float x : v)
      if (x > v[t]) ++r;
    return r;
  }
  std::vector<int32_t> top(int32_t n) const {
    std::vector<int32_t> o;
    for (int32_t t = 0; t < (int32_t)v.size(); ++t)
      if (v[t] > -kInf) o.push_back(t);
    std::stable_sort(o.begin(), o.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
    if ((int32_t)o.size() > n) o.resize(n);
    return o;
  }
};

}  // namespace

TEST_CASE("stash: top-n layout, ties to the lower id, ranks share ties, padding") {
  const int32_t V = 6;
  Sampler s(V, 16, 16, 8);
  const float lg[V] = {1.f, 3.f, 3.f, 0.f, -kInf, 2.f};
  dds_stash_args a = stash_args();
  a.num_rows = 1;
  a.num_requests = 1;
  a.logits = lg;
  Stash o(1, 1, 7, 1);  // 7 > 5 finite columns: two padding entries
  o.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  const long double Z = std::exp(1.0L) + 2 * std::exp(3.0L) + 1 + std::exp(2.0L);
  const int32_t want_id[8] = {1, 1, 2, 5, 0, 3, 0, 0};
  const int32_t want_rank[8] = {1, 1, 1, 3, 4, 5, 0, 0};
  const long double want_val[8] = {3 - std::log(Z), 3 - std::log(Z), 3 - std::log(Z),
                                   2 - std::log(Z), 1 - std::log(Z), 0 - std::log(Z),
                                   -INFINITY,       -INFINITY};
  for (int e = 0; e < 8; ++e) {
    CAPTURE(e);
    CHECK(o.id(0, 0, e) == want_id[e]);
    CHECK(o.rank(0, 0, e) == want_rank[e]);
    CHECK(close(o.val(0, 0, e), want_val[e]));
  }
  CHECK(o.status[0] == 0);

  // num_top = 0: only entry 0.
  Stash z(1, 1, 0, 1);
  z.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  CHECK(z.ids == std::vector<int32_t>{1});
  CHECK(z.ranks == std::vector<int32_t>{1});

  // Boundary tie: {2, 5, 5, 5}, n = 2 -> 1, 2 (not 3).
  Sampler s4(4, 4, 4, 4);
  const float t4[4] = {2.f, 5.f, 5.f, 5.f};
  a.logits = t4;
  Stash t(1, 1, 2, 1);
  t.attach(&a);
  REQUIRE(dds_stash_logprobs(s4, &a, nullptr) == DDS_OK);
  CHECK(t.ids == std::vector<int32_t>{1, 1, 2});
  CHECK(t.ranks == std::vector<int32_t>{1, 1, 1});
}

TEST_CASE("stash: own token ids, committed tokens, out-of-range ids, -inf columns") {
  const int32_t V = 5, N = 3;
  Sampler s(V, 8, 8, 4);
  // Request 0: rows 0-1, ids {4, 0, 2} (3 of 3); request 1: row 2, ids {1, 99, -1}, 2 used
  // (so entry 3 is padding), committed tokens given for every row.
  const std::vector<float> lg = {0.5f, -1.f, 2.f, 0.f, -kInf,  //
                                 1.f,  1.f,  1.f, 1.f, 1.f,    //
                                 -2.f, 3.f,  kNaN, 0.f, 1.f};
  const int32_t offs[3] = {0, 2, 3};
  const int32_t ids[6] = {4, 0, 2, 1, 99, -1};
  const int32_t nids[2] = {3, 2};
  const int32_t committed[3] = {2, 4, 7};
  dds_stash_args a = stash_args();
  a.num_rows = N;
  a.num_requests = 2;
  a.row_offsets = offs;
  a.logits = lg.data();
  a.token_ids = ids;
  a.num_token_ids = nids;
  a.committed_tokens = committed;
  Stash o(2, 2, 3, 2);
  o.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  for (int32_t i = 0; i < N; ++i) {
    CAPTURE(i);
    const int32_t r = i < 2 ? 0 : 1, j = i < 2 ? i : 0;
    const RefRow ref(std::vector<float>(lg.begin() + i * V, lg.begin() + (i + 1) * V), 1.f);
    // Entry 0: the committed token.
    CHECK(o.id(r, j, 0) == committed[i]);
    CHECK(close(o.val(r, j, 0), ref.logprob(committed[i])));
    CHECK(o.rank(r, j, 0) == ref.rank(committed[i]));
    for (int32_t e = 1; e <= 3; ++e) {
      CAPTURE(e);
      if (e <= nids[r]) {
        const int32_t t = ids[r * 3 + e - 1];
        CHECK(o.id(r, j, e) == t);  // written as given, even out of range
        CHECK(close(o.val(r, j, e), ref.logprob(t)));
        CHECK(o.rank(r, j, e) == ref.rank(t));
      } else {
        CHECK(o.id(r, j, e) == 0);
        CHECK(o.val(r, j, e) == -kInf);
        CHECK(o.rank(r, j, e) == 0);
      }
    }
  }
  // Spot values: row 0, id 4 is a -inf column: value -inf, rank 1 + 4 finite = 5.
  CHECK(o.val(0, 0, 1) == -kInf);
  CHECK(o.rank(0, 0, 1) == 5);
  // Row 1 is flat: every rank 1, committed 4 has log(1/5).
  CHECK(o.rank(0, 1, 0) == 1);
  CHECK(close(o.val(0, 1, 0), std::log(0.2L)));
  // Row 2 (request 1): committed 7 is out of range: -inf, rank 0; ids 99 too.
  CHECK(o.id(1, 0, 0) == 7);
  CHECK(o.val(1, 0, 0) == -kInf);
  CHECK(o.rank(1, 0, 0) == 0);
  CHECK(o.id(1, 0, 2) == 99);
  CHECK(o.rank(1, 0, 2) == 0);
  // Request 1 has one row: slot 1 row 1 untouched.
  CHECK(o.row_untouched(1, 1));
  // Request 1's committed 7 and id 99 are outside [0, V): flagged (the outputs as above).
  CHECK(o.status == std::vector<int32_t>{0, DDS_REQ_BAD_TOKEN_ID});

  // token_ids given but num_token_ids NULL: num_top ids each.
  a.num_token_ids = nullptr;
  Stash n(2, 2, 3, 2);
  n.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  CHECK(n.id(1, 0, 3) == -1);
  CHECK(n.rank(1, 0, 3) == 0);
  // A request with num_token_ids = 0 falls back to its top-n.
  const int32_t nids0[2] = {0, 2};
  a.num_token_ids = nids0;
  Stash f(2, 2, 3, 2);
  f.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  CHECK(f.id(0, 0, 1) == 2);
  CHECK(f.id(0, 0, 2) == 0);
  CHECK(f.id(0, 0, 3) == 3);
  CHECK(f.id(0, 1, 1) == 0);  // flat row: lower ids first
  CHECK(f.id(0, 1, 3) == 2);
}

TEST_CASE("stash: logits mode, temperatures and their sanitisation") {
  const int32_t V = 4;
  Sampler s(V, 8, 8, 4);
  const std::vector<float> row = {1.f, 4.f, -2.f, 3.f};
  std::vector<float> lg;
  for (int i = 0; i < 5; ++i) lg.insert(lg.end(), row.begin(), row.end());
  // Requests: T = 2, T = 0 (-> 1, no flag), T = NaN (-> 1, flagged), T = -1 (flagged),
  // T = 1e-40 (1/T overflows -> 1).
  const float temps[5] = {2.f, 0.f, kNaN, -1.f, 1e-40f};
  for (int32_t mode : {0, 1}) {
    CAPTURE(mode);
    dds_stash_args a = stash_args();
    a.num_rows = 5;
    a.num_requests = 5;
    a.logits = lg.data();
    a.temperatures = temps;
    a.temperature = 7.f;  // overridden
    a.logits_mode = mode;
    Stash o(5, 1, 2, 5);
    o.attach(&a);
    REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
    CHECK(o.status == std::vector<int32_t>{0, 0, DDS_REQ_BAD_TEMPERATURE,
                                           DDS_REQ_BAD_TEMPERATURE, 0});
    for (int32_t r = 0; r < 5; ++r) {
      CAPTURE(r);
      const RefRow ref(row, temps[r]);
      const float T = r == 0 ? 2.f : 1.f;
      CHECK(o.id(r, 0, 0) == 1);
      CHECK(o.id(r, 0, 1) == 1);
      CHECK(o.id(r, 0, 2) == 3);
      CHECK(o.rank(r, 0, 2) == 2);
      if (mode == 1) {
        CHECK(o.val(r, 0, 0) == 4.f / T);  // the tempered logit itself
        CHECK(o.val(r, 0, 2) == 3.f / T);
      } else {
        CHECK(close(o.val(r, 0, 0), ref.logprob(1)));
        CHECK(close(o.val(r, 0, 2), ref.logprob(3)));
      }
    }
  }
}

TEST_CASE("stash: keep, slots, num_valid clamping; untouched requests and rows") {
  const int32_t V = 5;
  Sampler s(V, 16, 8, 4);
  // 4 requests with 3, 2, 4, 1 rows.
  const int32_t offs[5] = {0, 3, 5, 9, 10};
  std::vector<float> lg(10 * V);
  for (int i = 0; i < 10 * V; ++i) lg[i] = (float)((i * 7) % 9) - 4.f;
  const uint8_t keep[4] = {1, 0, 1, 1};
  const int32_t slots[4] = {2, 0, 0, 5};  // request 3's slot is out of range
  const int32_t nvalid[4] = {7, 2, -1, 1};  // 7 clamps to 3 then to rows_per_slot = 2
  dds_stash_args a = stash_args();
  a.num_rows = 10;
  a.num_requests = 4;
  a.row_offsets = offs;
  a.logits = lg.data();
  a.keep = keep;
  a.slots = slots;
  a.num_valid = nvalid;
  Stash o(3, 2, 2, 4);
  o.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  // Request 0 -> slot 2, rows 0 and 1 (num_valid 7 clamped to rows_per_slot 2).
  for (int32_t j = 0; j < 2; ++j) {
    const RefRow ref(std::vector<float>(lg.begin() + j * V, lg.begin() + (j + 1) * V), 1.f);
    const auto top = ref.top(2);
    CHECK(o.id(2, j, 0) == ref.amax);
    CHECK(o.id(2, j, 1) == top[0]);
    CHECK(o.id(2, j, 2) == top[1]);
    CHECK(close(o.val(2, j, 2), ref.logprob(top[1])));
    CHECK(o.rank(2, j, 1) == 1);
  }
  // Request 1 not kept (its slot 0 untouched by it), request 2 has num_valid -1 -> nothing,
  // request 3's slot is bad -> flagged and skipped.
  CHECK(o.row_untouched(0, 0));
  CHECK(o.row_untouched(0, 1));
  CHECK(o.row_untouched(1, 0));
  CHECK(o.row_untouched(1, 1));
  CHECK(o.status[0] == 0);
  CHECK(o.status[1] == 0);
  CHECK(o.status[2] == 0);
  CHECK(o.status[3] == DDS_REQ_BAD_SLOT);

  // Defaults: keep NULL = all, slots NULL = r, num_valid NULL = all rows; one output only.
  dds_stash_args b = stash_args();
  const int32_t offs2[3] = {0, 1, 3};
  b.num_rows = 3;
  b.num_requests = 2;
  b.row_offsets = offs2;
  b.logits = lg.data();
  Stash p(2, 2, 1, 2);
  p.attach(&b);
  b.out_logprobs = nullptr;
  b.out_token_ids = nullptr;
  REQUIRE(dds_stash_logprobs(s, &b, nullptr) == DDS_OK);
  CHECK(std::all_of(p.ids.begin(), p.ids.end(), [](int32_t x) { return x == kPoisonI; }));
  CHECK(std::all_of(p.vals.begin(), p.vals.end(), [](float x) { return x == kPoisonF; }));
  CHECK(p.rank(0, 0, 0) == 1);
  CHECK(p.rank(0, 1, 0) == kPoisonI);  // request 0 has one row
  CHECK(p.rank(1, 0, 0) == 1);
  CHECK(p.rank(1, 1, 0) == 1);
}

TEST_CASE("stash: empty rows, bf16 logits with a stride, random rows against a reference") {
  const int32_t V = 3;
  Sampler s(V, 64, 64, 20);
  const float empty[3] = {-kInf, kNaN, -kInf};
  dds_stash_args a = stash_args();
  a.num_rows = 1;
  a.logits = empty;
  Stash o(1, 1, 2, 1);
  o.attach(&a);
  REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
  CHECK(o.ids == std::vector<int32_t>{0, 0, 0});
  CHECK(o.ranks == std::vector<int32_t>{0, 0, 0});
  for (float v : o.vals) CHECK(v == -kInf);

  // Random rows, bf16 with a stride, per-request T, mixed ids / top-n.
  const int32_t W = 300, N = 40, R = 8, n = 12;
  const int64_t stride = W + 4;
  Sampler sw(W, N, R, n);
  std::mt19937_64 rng(17);
  std::vector<uint16_t> h(N * stride, 0x7fc0);
  std::vector<float> f(N * W);
  for (int i = 0; i < N; ++i)
    for (int t = 0; t < W; ++t) {
      float x = std::normal_distribution<float>(0.f, 2.f)(rng);
      if (rng() % 10 == 0) x = -kInf;
      if (rng() % 50 == 0) x = std::round(x);  // some exact ties
      h[i * stride + t] = dds::f32_to_bf16(x);
      f[i * W + t] = dds::bf16_to_f32(h[i * stride + t]);
    }
  std::vector<int32_t> offs(R + 1), ids(R * n), nids(R), slots(R), committed(N);
  for (int r = 0; r <= R; ++r) offs[r] = r * N / R;
  std::vector<float> temps(R);
  for (int r = 0; r < R; ++r) {
    temps[r] = 0.5f + 0.25f * r;
    nids[r] = r % 2 ? (int32_t)(rng() % (n + 1)) : 0;
    slots[r] = R - 1 - r;
  }
  for (auto& x : ids) x = (int32_t)(rng() % W);
  for (auto& x : committed) x = (int32_t)(rng() % W);
  for (int32_t mode : {0, 1}) {
    CAPTURE(mode);
    dds_stash_args b = stash_args();
    b.num_rows = N;
    b.num_requests = R;
    b.row_offsets = offs.data();
    b.logits = h.data();
    b.dtype = DDS_DTYPE_BF16;
    b.row_stride = stride;
    b.temperatures = temps.data();
    b.token_ids = ids.data();
    b.num_token_ids = nids.data();
    b.slots = slots.data();
    b.committed_tokens = mode ? committed.data() : nullptr;
    b.logits_mode = mode;
    Stash o2(R, N / R, n, R);
    o2.attach(&b);
    REQUIRE(dds_stash_logprobs(sw, &b, nullptr) == DDS_OK);
    bool ok = true;
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < offs[r + 1] - offs[r]; ++j) {
        const int i = offs[r] + j;
        const RefRow ref(std::vector<float>(f.begin() + i * W, f.begin() + (i + 1) * W), temps[r]);
        std::vector<int32_t> want(n + 1, 0);
        want[0] = mode ? committed[i] : ref.amax;
        const auto top = ref.top(n);
        for (int e = 1; e <= n; ++e) {
          if (nids[r] > 0)
            want[e] = e <= nids[r] ? ids[r * n + e - 1] : -1;
          else
            want[e] = e <= (int)top.size() ? top[e - 1] : -1;
        }
        for (int e = 0; e <= n; ++e) {
          const int32_t t = want[e];
          const int slot = slots[r];
          if (t < 0) {  // padding
            ok = ok && o2.id(slot, j, e) == 0 && o2.val(slot, j, e) == -kInf &&
                 o2.rank(slot, j, e) == 0;
            continue;
          }
          const long double wv =
              ref.v[t] == -kInf ? -INFINITY : (mode ? (long double)ref.v[t] : ref.logprob(t));
          const bool good = o2.id(slot, j, e) == t && o2.rank(slot, j, e) == ref.rank(t) &&
                            close(o2.val(slot, j, e), wv);
          if (!good) {
            CAPTURE(r);
            CAPTURE(j);
            CAPTURE(e);
            CHECK(o2.id(slot, j, e) == t);
            CHECK(o2.rank(slot, j, e) == ref.rank(t));
            CHECK(o2.val(slot, j, e) == doctest::Approx((double)wv));
          }
          ok = ok && good;
        }
      }
    CHECK(ok);
  }
}
