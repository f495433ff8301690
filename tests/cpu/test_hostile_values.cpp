// Hostile device-resident values (issue #26 §1, docs/sampling.md §1 "Device-resident values"):
// the row_offsets of dds_sample / dds_stash_logprobs / dds_reveal that are reversed or outside
// [0, num_rows] (tests/hostile_cases.h: the four examples for 64 rows) and the
// dds_verify_drafts draft counts -3, 99, 2^30 for n = 4. Every output is checked exactly against
// valid single-row (or valid-count) calls built from the rule's hand-written ownership, every
// status word exactly; in debug mode the same inputs are DDS_ERR_INVALID_VALUE naming the array.
#include "hostile_cases.h"
#include "test_util.h"

using namespace tu;
using namespace hostile;

namespace {

constexpr int32_t V = 37;
constexpr int32_t kEmptyRow = 40;  // all -inf: token 0, DDS_REQ_EMPTY_ROW on request find(40)

std::vector<float> hostile_logits() {
  std::vector<float> lg((size_t)kRows * V);
  std::mt19937 rng(2601);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (float& x : lg) x = nd(rng);
  for (int32_t t = 0; t < V; ++t) lg[(size_t)kEmptyRow * V + t] = -kInf;
  return lg;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

void check_sample(const OffsetsCase& c, bool filtered) {
  Sampler s(V, kRows, kReqs);
  const std::vector<float> lg = hostile_logits();
  dds_sample_args a = sample_args();
  a.num_rows = kRows;
  a.num_requests = kReqs;
  a.row_offsets = c.offs;
  a.logits = lg.data();
  a.temperatures = kTemps;
  a.seeds = kSeeds;
  a.step = 5;
  if (filtered) {
    a.top_ks = kTopKs;
    a.top_ps = kTopPs;
  }
  const Outputs o = run_sample(s, a);
  for (int32_t r = 0; r < kReqs; ++r) {
    const int32_t empty = segment_of(c, kEmptyRow).request == r ? DDS_REQ_EMPTY_ROW : 0;
    INFO("request " << r);
    CHECK(o.status[r] == (c.flagged[r] | empty));
  }
  // Row i: request seg.request's parameters, its position key, unguided: a valid one-row call.
  for (int32_t i = 0; i < kRows; ++i) {
    const Segment& g = segment_of(c, i);
    const int32_t r = g.request, key = i - g.key_base;
    dds_sample_args b = sample_args();
    b.num_rows = 1;
    b.num_requests = 1;
    b.logits = lg.data() + (size_t)i * V;
    b.positions = &key;
    b.temperature = kTemps[r];
    b.seed = kSeeds[r];
    b.step = 5;
    if (filtered) {
      b.top_k = kTopKs[r];
      b.top_p = kTopPs[r];
    }
    const Outputs e = run_sample(s, b);
    INFO("row " << i << " request " << r << (g.owned ? " (owned)" : " (orphan)"));
    CHECK(o.tokens[i] == e.tokens[0]);
    CHECK(o.argmax[i] == e.argmax[0]);
    CHECK(same_bits(o.logprobs[i], e.logprobs[0]));
    CHECK(same_bits(o.confidence[i], e.confidence[0]));
    CHECK(same_bits(o.margin[i], e.margin[0]));
    CHECK(same_bits(o.entropy[i], e.entropy[0]));
  }
}

}  // namespace

TEST_CASE("hostile row_offsets: dds_sample writes every row, flags exactly the bad requests") {
  int32_t n;
  const OffsetsCase* cs = cases(&n);
  for (int32_t k = 0; k < n; ++k) {
    for (int filtered = 0; filtered < 2; ++filtered) {
      CAPTURE(cs[k].name);
      CAPTURE(filtered);
      check_sample(cs[k], filtered != 0);
    }
  }
}

TEST_CASE("hostile row_offsets: dds_stash_logprobs writes only owned rows, at i - row_offsets[r]") {
  constexpr int32_t kTop = kStashTop, E = kTop + 1;
  Sampler s(V, kRows, kReqs, kTop);
  const std::vector<float> lg = hostile_logits();
  int32_t n;
  const OffsetsCase* cs = cases(&n);
  for (int32_t k = 0; k < n; ++k) {
    const OffsetsCase& c = cs[k];
    CAPTURE(c.name);
    const size_t elems = (size_t)kReqs * kRows * E;
    std::vector<int32_t> ids(elems, kPoisonI), ranks(elems, kPoisonI), st(kReqs, kPoisonI);
    std::vector<float> lps(elems, kPoisonF);
    dds_stash_args a = stash_args();
    set_offsets_stash(&a, c.offs, lg.data(), kTemps);
    a.out_token_ids = ids.data();
    a.out_logprobs = lps.data();
    a.out_ranks = ranks.data();
    a.request_status = st.data();
    REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
    for (int32_t r = 0; r < kReqs; ++r) CHECK(st[r] == c.flagged[r]);
    std::vector<char> written((size_t)kReqs * kRows, 0);
    for (int32_t i = 0; i < kRows; ++i) {
      const Segment& g = segment_of(c, i);
      if (!g.owned) continue;
      const int32_t slot = g.request, j = i - g.key_base;
      written[(size_t)slot * kRows + j] = 1;
      std::vector<int32_t> eids(E, kPoisonI), eranks(E, kPoisonI);
      std::vector<float> elps(E, kPoisonF);
      dds_stash_args b = stash_args();
      b.num_rows = 1;
      b.num_requests = 1;
      b.logits = lg.data() + (size_t)i * V;
      b.temperature = kTemps[g.request];
      b.num_top = kTop;
      b.num_slots = 1;
      b.rows_per_slot = 1;
      b.out_token_ids = eids.data();
      b.out_logprobs = elps.data();
      b.out_ranks = eranks.data();
      REQUIRE(dds_stash_logprobs(s, &b, nullptr) == DDS_OK);
      for (int32_t e = 0; e < E; ++e) {
        const size_t at = ((size_t)slot * kRows + j) * E + e;
        INFO("row " << i << " slot " << slot << " entry " << e);
        CHECK(ids[at] == eids[e]);
        CHECK(ranks[at] == eranks[e]);
        CHECK(same_bits(lps[at], elps[e]));
      }
    }
    for (size_t q = 0; q < written.size(); ++q) {
      if (written[q]) continue;
      for (int32_t e = 0; e < E; ++e) {
        INFO("slot row " << q << " must be untouched");
        CHECK(ids[q * E + e] == kPoisonI);
        CHECK(ranks[q * E + e] == kPoisonI);
        CHECK(lps[q * E + e] == kPoisonF);
      }
    }
  }
}

TEST_CASE("hostile row_offsets: dds_reveal reveals only owned rows, never in flagged requests") {
  Sampler s(V, kRows, kReqs);
  std::vector<float> scores(kRows);
  for (int32_t i = 0; i < kRows; ++i) scores[i] = reveal_score(i);
  int32_t n;
  const OffsetsCase* cs = cases(&n);
  for (int32_t k = 0; k < n; ++k) {
    const OffsetsCase& c = cs[k];
    CAPTURE(c.name);
    std::vector<uint8_t> rev(kRows, 0xee);
    std::vector<int32_t> nrev(kReqs, kPoisonI), st(kReqs, kPoisonI);
    dds_reveal_args a;
    REQUIRE(dds_reveal_args_init(&a, sizeof a) == DDS_OK);
    set_offsets_reveal(&a, c.offs, scores.data());
    a.reveal = rev.data();
    a.num_revealed = nrev.data();
    a.request_status = st.data();
    REQUIRE(dds_reveal(s, &a, nullptr) == DDS_OK);
    // Expected: per request, the kRevealCount (2) best-scoring rows it owns.
    std::vector<uint8_t> want(kRows, 0);
    for (int32_t r = 0; r < kReqs; ++r) {
      std::vector<int32_t> own;
      for (int32_t i = 0; i < kRows; ++i) {
        const Segment& g = segment_of(c, i);
        if (g.owned && g.request == r) own.push_back(i);
      }
      std::sort(own.begin(), own.end(), [&](int32_t x, int32_t y) { return scores[x] > scores[y]; });
      const int32_t take = std::min<int32_t>(kRevealCount, (int32_t)own.size());
      for (int32_t q = 0; q < take; ++q) want[own[q]] = 1;
      INFO("request " << r);
      CHECK(nrev[r] == take);
      CHECK(st[r] == c.flagged[r]);
    }
    CHECK(rev == want);
  }
}

TEST_CASE("hostile draft counts: -3, 99, 2^30 for n = 4 are clamped to [0, n] and flagged") {
  Sampler s(V, 64, 16);
  const int32_t R = kVerifyReqs, n = kDrafts;
  std::vector<float> tl((size_t)R * (n + 1) * V), dl((size_t)R * n * V);
  std::mt19937 rng(2602);
  std::normal_distribution<float> nd(0.f, 1.5f);
  for (float& x : tl) x = nd(rng);
  for (float& x : dl) x = nd(rng);
  const std::vector<int32_t> drafts = argmax_drafts(dl, V);
  auto run = [&](const int32_t* counts, std::vector<int32_t>* acc, std::vector<int32_t>* toks,
                 std::vector<float>* lps, std::vector<int32_t>* st) {
    acc->assign(R, kPoisonI);
    toks->assign((size_t)R * (n + 1), kPoisonI);
    lps->assign((size_t)R * (n + 1), kPoisonF);
    st->assign(R, kPoisonI);
    dds_verify_args a;
    REQUIRE(dds_verify_args_init(&a, sizeof a) == DDS_OK);
    set_verify(&a, R, n, counts, drafts.data(), dl.data(), tl.data(), acc->data(), toks->data());
    a.seed = 7;
    a.out_logprobs = lps->data();
    a.request_status = st->data();
    const dds_status rc = dds_verify_drafts(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(rc == DDS_OK);
  };
  std::vector<int32_t> acc_h, toks_h, st_h, acc_v, toks_v, st_v;
  std::vector<float> lps_h, lps_v;
  run(kDraftCounts, &acc_h, &toks_h, &lps_h, &st_h);
  run(kDraftCountsUsed, &acc_v, &toks_v, &lps_v, &st_v);
  CHECK(acc_h == acc_v);
  CHECK(toks_h == toks_v);
  for (size_t q = 0; q < lps_h.size(); ++q) CHECK(same_bits(lps_h[q], lps_v[q]));
  for (int32_t r = 0; r < R; ++r) {
    INFO("request " << r);
    CHECK(st_v[r] == 0);
    CHECK(st_h[r] == (kDraftCounts[r] == kDraftCountsUsed[r] ? 0 : kBadDraftCount));
    CHECK(acc_h[r] <= kDraftCountsUsed[r]);
  }
}

TEST_CASE("debug checks: hostile row_offsets and draft counts are DDS_ERR_INVALID_VALUE") {
  Sampler dbg(V, kRows, kReqs, kStashTop, DDS_FLAG_DEBUG_CHECKS);
  const std::vector<float> lg = hostile_logits();
  std::vector<float> scores(kRows, 0.5f);
  std::vector<int32_t> tok(kRows), ids((size_t)kReqs * kRows * (kStashTop + 1));
  std::vector<uint8_t> rev(kRows);
  // One message per condition: the first flagged request's.
  const char* needles[] = {"row_offsets must be non-decreasing: row_offsets[2] = 3 < row_offsets[1] = 5",
                           "row_offsets must be non-decreasing: row_offsets[1] = -7 < row_offsets[0] = 0",
                           "row_offsets[0] (64) must be 0",
                           "row_offsets[0..1] (request 0) = [0, 2147483647) must lie in [0, num_rows = 64]"};
  int32_t n;
  const OffsetsCase* cs = cases(&n);
  for (int32_t k = 0; k < n; ++k) {
    CAPTURE(cs[k].name);
    dds_sample_args a = sample_args();
    a.num_rows = kRows;
    a.num_requests = kReqs;
    a.row_offsets = cs[k].offs;
    a.logits = lg.data();
    a.tokens = tok.data();
    CHECK(dds_sample(dbg, &a, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find(std::string("dds_sample: args->") + needles[k]) !=
          std::string::npos);
    INFO(dds_last_error());
    dds_stash_args b = stash_args();
    set_offsets_stash(&b, cs[k].offs, lg.data(), nullptr);
    b.out_token_ids = ids.data();
    CHECK(dds_stash_logprobs(dbg, &b, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find(needles[k]) != std::string::npos);
    dds_reveal_args c;
    REQUIRE(dds_reveal_args_init(&c, sizeof c) == DDS_OK);
    c.num_rows = kRows;
    c.num_requests = kReqs;
    c.row_offsets = cs[k].offs;
    c.scores = scores.data();
    c.reveal = rev.data();
    CHECK(dds_reveal(dbg, &c, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find(needles[k]) != std::string::npos);
  }
  // Draft counts: the first bad one named.
  std::vector<float> tl((size_t)kVerifyReqs * (kDrafts + 1) * V, 0.f), dl((size_t)kVerifyReqs * kDrafts * V, 0.f);
  std::vector<int32_t> drafts((size_t)kVerifyReqs * kDrafts, 1), acc(kVerifyReqs),
      out((size_t)kVerifyReqs * (kDrafts + 1));
  dds_verify_args v;
  REQUIRE(dds_verify_args_init(&v, sizeof v) == DDS_OK);
  set_verify(&v, kVerifyReqs, kDrafts, kDraftCounts, drafts.data(), dl.data(), tl.data(), acc.data(),
             out.data());
  CHECK(dds_verify_drafts(dbg, &v, nullptr) == DDS_ERR_INVALID_VALUE);
  CHECK(std::string(dds_last_error()).find("args->draft_counts[0] (request 0) = -3 must be in [0, num_drafts = 4]") !=
        std::string::npos);
  v.draft_counts = kDraftCountsUsed;
  CHECK(dds_verify_drafts(dbg, &v, nullptr) == DDS_OK);
}

// The other device-resident values without a bit before (hostile_cases.h's bad_ids): input token
// ids outside [0, V), num_token_ids outside [0, num_top], bad reveal parameters. Outputs follow
// the documented rules (unchanged); the bits say so.
TEST_CASE("hostile token ids, num_token_ids and reveal parameters are flagged") {
  using namespace bad_ids;
  constexpr int32_t R = kReqs, rows = kNumRows, E = kTop + 1;
  Sampler s(V, 64, 16, kTop);
  Sampler dbg(V, 64, 16, kTop, DDS_FLAG_DEBUG_CHECKS);
  const std::vector<float> lg = hostile_logits();
  const int32_t* offs = kOffsets;
  auto stash = [&](dds_sampler* sp, const int32_t* ids, const int32_t* nids, const int32_t* committed,
                   const int32_t* nvalid, std::vector<int32_t>* st) {
    std::vector<int32_t> out((size_t)R * 2 * E, kPoisonI);
    st->assign(R, kPoisonI);
    dds_stash_args a = stash_args();
    a.num_rows = rows;
    a.num_requests = R;
    a.row_offsets = offs;
    a.logits = lg.data();
    a.token_ids = ids;
    a.num_token_ids = nids;
    a.committed_tokens = committed;
    a.num_valid = nvalid;
    a.num_top = kTop;
    a.num_slots = R;
    a.rows_per_slot = 2;
    a.out_token_ids = out.data();
    a.request_status = st->data();
    return dds_stash_logprobs(sp, &a, nullptr);
  };
  std::vector<int32_t> st;
  const int32_t* ids = kTokenIds;
  const int32_t* nids = kNumTokenIds;
  REQUIRE(stash(s, ids, nids, nullptr, nullptr, &st) == DDS_OK);
  CHECK(st == std::vector<int32_t>(kStashStatus, kStashStatus + R));
  CHECK(stash(dbg, ids, nids, nullptr, nullptr, &st) == DDS_ERR_INVALID_VALUE);
  CHECK(std::string(dds_last_error()).find("args->num_token_ids[0] (request 0) must be in [0, num_top]") !=
        std::string::npos);
  const int32_t nids_ok[R] = {0, 2, 3, 3};
  CHECK(stash(dbg, ids, nids_ok, nullptr, nullptr, &st) == DDS_ERR_INVALID_VALUE);
  CHECK(std::string(dds_last_error()).find("args->token_ids[4] (request 1, id 1) = -5 must be in [0, vocab_size = 37)") !=
        std::string::npos);
  const std::vector<int32_t> committed_v = committed(V);
  const int32_t* nvalid = kNumValid;
  REQUIRE(stash(s, nullptr, nullptr, committed_v.data(), nvalid, &st) == DDS_OK);
  CHECK(st == std::vector<int32_t>{0, DDS_REQ_BAD_TOKEN_ID, 0, 0});
  CHECK(stash(dbg, nullptr, nullptr, committed_v.data(), nvalid, &st) == DDS_ERR_INVALID_VALUE);
  CHECK(std::string(dds_last_error()).find("args->committed_tokens[3] (row 3) = 37 must be in [0, vocab_size = 37)") !=
        std::string::npos);

  // Verify: bad_ids::drafts.
  {
    const int32_t n = kNumDrafts;
    std::vector<float> tl((size_t)R * (n + 1) * V), dl((size_t)R * n * V);
    std::mt19937 rng(2606);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (float& x : tl) x = nd(rng);
    for (float& x : dl) x = nd(rng);
    const std::vector<int32_t> drafts = bad_ids::drafts(V);
    std::vector<int32_t> acc(R), out((size_t)R * (n + 1)), vst(R, kPoisonI);
    const int32_t* counts = kCounts;
    dds_verify_args a;
    REQUIRE(dds_verify_args_init(&a, sizeof a) == DDS_OK);
    set_verify(&a, R, n, counts, drafts.data(), dl.data(), tl.data(), acc.data(), out.data());
    a.request_status = vst.data();
    REQUIRE(dds_verify_drafts(s, &a, nullptr) == DDS_OK);
    CHECK(vst == std::vector<int32_t>(kVerifyStatus, kVerifyStatus + R));
    CHECK(acc[0] == 0);  // an out-of-range draft is rejected (p = q = 0)
    CHECK(dds_verify_drafts(dbg, &a, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find("args->draft_tokens[0] (request 0, draft 0) = -1 must be in [0, vocab_size = 37)") !=
          std::string::npos);
  }

  // Reveal: bad_ids::kThresholds, kFactors, kPositionTemps.
  {
    std::vector<float> scores(rows);
    for (int32_t i = 0; i < rows; ++i) scores[i] = 0.1f * (float)i;
    const float *thr = kThresholds, *fac = kFactors, *pt = kPositionTemps;
    std::vector<uint8_t> rev(rows);
    std::vector<int32_t> rst(R, kPoisonI);
    dds_reveal_args a;
    REQUIRE(dds_reveal_args_init(&a, sizeof a) == DDS_OK);
    a.num_rows = rows;
    a.num_requests = R;
    a.row_offsets = offs;
    a.scores = scores.data();
    a.thresholds = thr;
    a.factors = fac;
    a.position_temperatures = pt;
    a.reveal = rev.data();
    a.request_status = rst.data();
    REQUIRE(dds_reveal(s, &a, nullptr) == DDS_OK);
    CHECK(rst == std::vector<int32_t>(kRevealStatus, kRevealStatus + R));
    CHECK(dds_reveal(dbg, &a, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find("args->thresholds[0] (request 0) must not be NaN") != std::string::npos);
    const float thr_ok[R] = {0.5f, 0.5f, 0.5f, 0.5f};
    a.thresholds = thr_ok;
    CHECK(dds_reveal(dbg, &a, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find("args->factors[1] (request 1) = -0.5 must be finite and >= 0") !=
          std::string::npos);
    const float fac_ok[R] = {1.f, 1.f, 1.f, 1.f};
    a.factors = fac_ok;
    CHECK(dds_reveal(dbg, &a, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find("args->position_temperatures[3] (request 3) = -1 must be >= 0") !=
          std::string::npos);
  }
}
