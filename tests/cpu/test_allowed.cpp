// Allowed-token bitmasks (allowed_token_masks) on the CPU backend: a masked call equals the same
// call on logits whose disallowed columns are -inf, exactly (same Philox draws: the same tokens,
// bit-identical statistics) for dds_sample (both stats modes, guidance, filters, greedy, bf16),
// dds_stash_logprobs and dds_verify_drafts; empty rows; argument checks; older struct sizes.
#include <dds/dds_shard.h>

#include "test_util.h"

namespace {

using tu::kInf;

// A random mask per request: words of ceil(V / 32) in a row of `stride` words; the words past
// ceil(V / 32) and the bits past V hold random garbage (they must be ignored). Request `empty`
// (if >= 0) allows nothing; request `full` (if >= 0) allows everything.
std::vector<int32_t> random_masks(std::mt19937_64& rng, int32_t V, int32_t R, int64_t stride,
                                  double p_allow, int32_t empty = -1, int32_t full = -1) {
  std::vector<int32_t> m((size_t)R * stride);
  std::bernoulli_distribution bit(p_allow);
  for (int32_t r = 0; r < R; ++r)
    for (int64_t w = 0; w < stride; ++w) {
      uint32_t x = 0;
      for (int b = 0; b < 32; ++b) {
        const int64_t t = w * 32 + b;
        const bool on = t >= V ? (rng() & 1) != 0 : r == full ? true : r == empty ? false : bit(rng);
        if (on) x |= 1u << b;
      }
      m[(size_t)r * stride + w] = (int32_t)x;
    }
  return m;
}

bool allowed_bit(const std::vector<int32_t>& m, int64_t stride, int32_t r, int32_t t) {
  return (((uint32_t)m[(size_t)r * stride + (t >> 5)]) >> (t & 31)) & 1u;
}

// Request of each row from the offsets.
std::vector<int32_t> row_requests(const std::vector<int32_t>& offs) {
  std::vector<int32_t> rr;
  for (size_t r = 0; r + 1 < offs.size(); ++r)
    for (int32_t i = offs[r]; i < offs[r + 1]; ++i) rr.push_back((int32_t)r);
  return rr;
}

// logits with the disallowed columns of each row's request set to -inf (f32).
std::vector<float> masked_copy(const std::vector<float>& x, int32_t V, int64_t stride,
                               const std::vector<int32_t>& rr, const std::vector<int32_t>& m,
                               int64_t mstride) {
  std::vector<float> y = x;
  for (size_t i = 0; i < rr.size(); ++i)
    for (int32_t t = 0; t < V; ++t)
      if (!allowed_bit(m, mstride, rr[i], t)) y[i * stride + t] = -kInf;
  return y;
}

void check_same(const tu::Outputs& a, const tu::Outputs& b) {
  CHECK(a.tokens == b.tokens);
  CHECK(a.argmax == b.argmax);
  CHECK(a.status == b.status);
  // Bit-identical statistics (NaN-free: compare as bits through memcmp).
  auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
  };
  CHECK(same(a.logprobs, b.logprobs));
  CHECK(same(a.confidence, b.confidence));
  CHECK(same(a.margin, b.margin));
  CHECK(same(a.entropy, b.entropy));
  CHECK(same(a.probs, b.probs));
}

}  // namespace

TEST_CASE("allowed masks: dds_sample equals sampling the logits with disallowed columns at -inf") {
  std::mt19937_64 rng(2024);
  for (int32_t V : {1, 7, 32, 33, 1025, 2100}) {
    for (int variant = 0; variant < 6; ++variant) {
      CAPTURE(V);
      CAPTURE(variant);
      const std::vector<int32_t> offs = {0, 3, 4, 9, 11};
      const int32_t R = 4, N = 11;
      const int64_t stride = V + (variant % 2) * 5;
      const int64_t words = (V + 31) / 32;
      const int64_t mstride = variant % 3 == 0 ? 0 : words + variant;  // 0 = default
      const int64_t ms = mstride == 0 ? words : mstride;
      std::vector<float> logits((size_t)N * stride, 99.f), uncond((size_t)N * stride, 99.f);
      for (int32_t i = 0; i < N; ++i) {
        const auto row = tu::random_row(rng, V, variant < 3 ? 2.f : 6.f);
        const auto urow = tu::random_row(rng, V, 2.f);
        std::copy(row.begin(), row.end(), logits.begin() + (size_t)i * stride);
        std::copy(urow.begin(), urow.end(), uncond.begin() + (size_t)i * stride);
      }
      const auto masks = random_masks(rng, V, R, ms, 0.6, /*empty=*/variant == 4 ? 1 : -1,
                                      /*full=*/2);
      const auto rr = row_requests(offs);
      const auto ref_logits = masked_copy(logits, V, stride, rr, masks, ms);
      tu::Sampler s(V);
      std::vector<float> temps = {1.f, 0.7f, 0.f, 1.3f};
      std::vector<int32_t> ks = {0, 3, 0, 0};
      std::vector<float> ps = {1.f, 1.f, 0.8f, 0.9f};
      std::vector<float> mps = {0.f, 0.f, 0.f, 0.05f};
      std::vector<float> gs = {0.f, 1.5f, 0.f, 0.5f};
      std::vector<uint64_t> seeds = {1, 2, 3, 4};
      for (int32_t stats : {DDS_STATS_PROCESSED, DDS_STATS_GUIDED}) {
        dds_sample_args a = tu::sample_args();
        a.num_rows = N;
        a.num_requests = R;
        a.row_offsets = offs.data();
        a.row_stride = stride;
        a.temperatures = temps.data();
        a.top_ks = ks.data();
        a.top_ps = ps.data();
        a.min_ps = mps.data();
        a.seeds = seeds.data();
        a.step = 5;
        a.stats = stats;
        a.banned_token = V > 3 ? 3 : -1;
        if (variant >= 2) {
          a.uncond_logits = uncond.data();
          a.uncond_row_stride = stride;
          a.uncond_num_rows = N;
          a.guidance_scales = gs.data();
        }
        a.logits = ref_logits.data();
        const tu::Outputs ref = tu::run_sample_probs(s, a, V);
        a.logits = logits.data();
        a.allowed_token_masks = masks.data();
        a.allowed_mask_stride = mstride;
        const tu::Outputs got = tu::run_sample_probs(s, a, V);
        check_same(got, ref);
        // Masked columns are never sampled nor argmax; probabilities 0 there.
        for (int32_t i = 0; i < N; ++i) {
          const bool empty = (got.status[rr[i]] & DDS_REQ_EMPTY_ROW) != 0 && variant == 4 &&
                             rr[i] == 1;
          if (empty) {
            CHECK(got.tokens[i] == 0);
            continue;
          }
          if (got.status[rr[i]] & DDS_REQ_EMPTY_ROW) continue;
          CHECK(allowed_bit(masks, ms, rr[i], got.tokens[i]));
          CHECK(allowed_bit(masks, ms, rr[i], got.argmax[i]));
          for (int32_t t = 0; t < V; ++t)
            if (!allowed_bit(masks, ms, rr[i], t)) CHECK(got.probs[(size_t)i * V + t] == 0.f);
        }
        if (variant == 4) CHECK((got.status[1] & DDS_REQ_EMPTY_ROW) != 0);
      }
    }
  }
}

TEST_CASE("allowed masks: bf16 logits, one allowed token, and a mask that allows everything") {
  const int32_t V = 70;
  std::mt19937_64 rng(7);
  std::vector<uint16_t> logits(3 * V);
  for (auto& x : logits) x = dds::f32_to_bf16(std::normal_distribution<float>(0.f, 3.f)(rng));
  std::vector<int32_t> masks(3 * 3, 0);
  masks[0 * 3 + 1] = 1 << 9;  // request 0: only token 41
  for (int w = 0; w < 3; ++w) masks[2 * 3 + w] = -1;  // request 2: everything
  masks[1 * 3 + 0] = 0x0f0f0f0f;
  masks[1 * 3 + 2] = 0x30;  // 68, 69
  tu::Sampler s(V);
  dds_sample_args a = tu::sample_args();
  a.num_rows = 3;
  a.num_requests = 3;
  a.logits = logits.data();
  a.dtype = DDS_DTYPE_BF16;
  a.seed = 99;
  a.allowed_token_masks = masks.data();
  const tu::Outputs got = tu::run_sample_probs(s, a, V);
  CHECK(got.tokens[0] == 41);
  CHECK(got.argmax[0] == 41);
  CHECK(got.logprobs[0] == 0.f);
  CHECK(got.confidence[0] == 1.f);
  CHECK(got.entropy[0] == 0.f);
  std::vector<uint16_t> ref = logits;
  for (int32_t t = 0; t < V; ++t)
    if (!((((uint32_t)masks[3 + (t >> 5)]) >> (t & 31)) & 1u)) ref[V + t] = 0xff80;  // -inf
  a.allowed_token_masks = nullptr;
  const tu::Outputs unmasked = tu::run_sample_probs(s, a, V);
  CHECK(got.tokens[2] == unmasked.tokens[2]);  // all-allowed request: as without a mask
  CHECK(got.entropy[2] == unmasked.entropy[2]);
  a.logits = ref.data();
  const tu::Outputs r1 = tu::run_sample_probs(s, a, V);
  CHECK(got.tokens[1] == r1.tokens[1]);
  CHECK(got.logprobs[1] == r1.logprobs[1]);
  CHECK(got.entropy[1] == r1.entropy[1]);
}

TEST_CASE("allowed masks: dds_stash_logprobs equals the stash of the -inf-masked logits") {
  std::mt19937_64 rng(31);
  for (int32_t V : {5, 40, 1100}) {
    CAPTURE(V);
    const std::vector<int32_t> offs = {0, 2, 5, 6};
    const int32_t R = 3, N = 6, n = 6;
    const int64_t ms = (V + 31) / 32 + 1;
    std::vector<float> logits;
    for (int32_t i = 0; i < N; ++i) {
      const auto row = tu::random_row(rng, V, 3.f);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const auto masks = random_masks(rng, V, R, ms, 0.5, /*empty=*/2, -1);
    const auto rr = row_requests(offs);
    const auto ref_logits = masked_copy(logits, V, V, rr, masks, ms);
    std::vector<int32_t> ids = {0, 1, 2, 3, 4, 4, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
    std::vector<int32_t> nids = {5, 0, 2};
    std::vector<int32_t> committed = {1, 2, 3, 4, 0, 1};
    tu::Sampler s(V, 64, 16, 20);
    for (int mode = 0; mode < 4; ++mode) {
      CAPTURE(mode);
      const size_t E = (size_t)R * 3 * (n + 1);
      std::vector<int32_t> tok_ref(E, -7), tok(E, -7), rk_ref(E, -7), rk(E, -7);
      std::vector<float> lp_ref(E, 1.f), lp(E, 1.f);
      dds_stash_args a = tu::stash_args();
      a.num_rows = N;
      a.num_requests = R;
      a.row_offsets = offs.data();
      a.num_top = n;
      a.num_slots = R;
      a.rows_per_slot = 3;
      a.temperature = 0.8f;
      a.logits_mode = mode & 1;
      if (mode & 2) {
        a.token_ids = ids.data();
        a.num_token_ids = nids.data();
        a.committed_tokens = committed.data();
      }
      a.logits = ref_logits.data();
      a.out_token_ids = tok_ref.data();
      a.out_logprobs = lp_ref.data();
      a.out_ranks = rk_ref.data();
      REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
      a.logits = logits.data();
      a.allowed_token_masks = masks.data();
      a.allowed_mask_stride = ms;
      a.out_token_ids = tok.data();
      a.out_logprobs = lp.data();
      a.out_ranks = rk.data();
      const dds_status st = dds_stash_logprobs(s, &a, nullptr);
      INFO(dds_last_error());
      REQUIRE(st == DDS_OK);
      CHECK(tok == tok_ref);
      CHECK(rk == rk_ref);
      CHECK(std::memcmp(lp.data(), lp_ref.data(), E * 4) == 0);
      // Without ids of its own, no top-n entry of a request is a disallowed token.
      for (int32_t r = 0; r < R; ++r)
        for (int32_t j = 0; j < offs[r + 1] - offs[r] && j < 3; ++j)
          for (int32_t e = 1; e <= n; ++e) {
            const size_t k = ((size_t)r * 3 + j) * (n + 1) + e;
            if (!(mode & 2) && lp[k] > -kInf) CHECK(allowed_bit(masks, ms, r, tok[k]));
          }
    }
  }
}

TEST_CASE("allowed masks: dds_verify_drafts equals verification of the -inf-masked logits") {
  const int32_t V = 45, n = 3, R = 4;
  std::mt19937_64 rng(77);
  const int64_t ms = 2;
  std::vector<float> draft, target;
  for (int32_t i = 0; i < R * n; ++i) {
    const auto row = tu::random_row(rng, V, 1.5f);
    draft.insert(draft.end(), row.begin(), row.end());
  }
  for (int32_t i = 0; i < R * (n + 1); ++i) {
    const auto row = tu::random_row(rng, V, 1.5f);
    target.insert(target.end(), row.begin(), row.end());
  }
  const auto masks = random_masks(rng, V, R, ms, 0.4, -1, -1);
  std::vector<int32_t> rd, rt;
  for (int32_t r = 0; r < R; ++r) {
    for (int32_t i = 0; i < n; ++i) rd.push_back(r);
    for (int32_t i = 0; i <= n; ++i) rt.push_back(r);
  }
  const auto draft_ref = masked_copy(draft, V, V, rd, masks, ms);
  const auto target_ref = masked_copy(target, V, V, rt, masks, ms);
  tu::Sampler s(V, 64, 16);
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    std::vector<int32_t> drafts((size_t)R * n);
    for (auto& d : drafts) d = (int32_t)(rng() % V);  // some disallowed, some not
    std::vector<int32_t> acc_ref(R, -7), acc(R, -7), out_ref((size_t)R * (n + 1), -7),
        out((size_t)R * (n + 1), -7), st_ref(R, -7), st(R, -7);
    std::vector<float> lp_ref((size_t)R * (n + 1)), lp((size_t)R * (n + 1));
    dds_verify_args a;
    REQUIRE(dds_verify_args_init(&a, sizeof a) == DDS_OK);
    a.num_requests = R;
    a.num_drafts = n;
    a.draft_tokens = drafts.data();
    a.seed = (uint64_t)trial;
    a.temperature = trial % 5 == 0 ? 0.f : 1.f;
    a.top_k = trial % 3 == 1 ? 5 : 0;
    a.draft_logits = draft_ref.data();
    a.target_logits = target_ref.data();
    a.accepted_counts = acc_ref.data();
    a.out_tokens = out_ref.data();
    a.out_logprobs = lp_ref.data();
    a.request_status = st_ref.data();
    REQUIRE(dds_verify_drafts(s, &a, nullptr) == DDS_OK);
    a.draft_logits = draft.data();
    a.target_logits = target.data();
    a.allowed_token_masks = masks.data();
    a.allowed_mask_stride = ms;
    a.accepted_counts = acc.data();
    a.out_tokens = out.data();
    a.out_logprobs = lp.data();
    a.request_status = st.data();
    const dds_status status = dds_verify_drafts(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(status == DDS_OK);
    CHECK(acc == acc_ref);
    CHECK(out == out_ref);
    CHECK(st == st_ref);
    CHECK(std::memcmp(lp.data(), lp_ref.data(), lp.size() * 4) == 0);
    for (int32_t r = 0; r < R; ++r)
      for (int32_t e = 0; e <= acc[r]; ++e) CHECK(allowed_bit(masks, ms, r, out[(size_t)r * (n + 1) + e]));
  }
}

TEST_CASE("allowed masks: argument checks name the argument") {
  const int32_t V = 100;  // 4 words
  tu::Sampler s(V);
  std::vector<float> logits(2 * V, 0.f);
  std::vector<int32_t> masks(16, -1), tokens(2);
  dds_sample_args a = tu::sample_args();
  a.num_rows = 2;
  a.num_requests = 2;
  a.logits = logits.data();
  a.tokens = tokens.data();
  a.allowed_token_masks = masks.data();
  a.allowed_mask_stride = 3;
  CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(tu::contains(dds_last_error(), "allowed_mask_stride (3) must be >= ceil(vocab_size / 32) = 4"));
  a.allowed_mask_stride = -1;
  CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(tu::contains(dds_last_error(), "allowed_mask_stride"));
  a.allowed_mask_stride = INT64_MAX;
  CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(tu::contains(dds_last_error(), "allowed_mask_stride"));
  a.allowed_mask_stride = 4;
  a.allowed_token_masks = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(masks.data()) + 2);
  CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(tu::contains(dds_last_error(), "allowed_token_masks"));
  a.allowed_token_masks = masks.data();
  CHECK(dds_sample(s, &a, nullptr) == DDS_OK);
  a.allowed_token_masks = nullptr;  // stride not read without masks
  a.allowed_mask_stride = -5;
  CHECK(dds_sample(s, &a, nullptr) == DDS_OK);

  dds_stash_args st = tu::stash_args();
  std::vector<int32_t> out(2 * 21);
  st.num_rows = 2;
  st.num_requests = 2;
  st.logits = logits.data();
  st.num_slots = 2;
  st.rows_per_slot = 1;
  st.out_token_ids = out.data();
  st.allowed_token_masks = masks.data();
  st.allowed_mask_stride = 2;
  CHECK(dds_stash_logprobs(s, &st, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(tu::contains(dds_last_error(), "dds_stash_logprobs: args->allowed_mask_stride (2)"));

  dds_verify_args v;
  dds_verify_args_init(&v, sizeof v);
  std::vector<int32_t> acc(1), vo(1);
  v.target_logits = logits.data();
  v.accepted_counts = acc.data();
  v.out_tokens = vo.data();
  v.allowed_token_masks = masks.data();
  v.allowed_mask_stride = 1;
  CHECK(dds_verify_drafts(s, &v, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(tu::contains(dds_last_error(), "dds_verify_drafts: args->allowed_mask_stride (1)"));
  v.allowed_mask_stride = 0;
  CHECK(dds_verify_drafts(s, &v, nullptr) == DDS_OK);

  // The vocabulary-parallel path rejects masks.
  dds_shard_args sh;
  REQUIRE(dds_shard_args_init(&sh, sizeof sh) == DDS_OK);
  sh.world_size = 1;
  sh.vocab_slice = V;
  dds_shard_plan plan;
  plan.struct_size = sizeof plan;
  a.allowed_token_masks = masks.data();
  a.allowed_mask_stride = 0;
  CHECK(dds_sample_shard_plan(s, &a, &sh, &plan) == DDS_ERR_UNSUPPORTED);
  CHECK(tu::contains(dds_last_error(), "allowed_token_masks must be NULL"));
}

TEST_CASE("allowed masks: a caller built against the struct without the mask fields still works") {
  const int32_t V = 50;
  tu::Sampler s(V);
  std::mt19937_64 rng(5);
  const auto logits = tu::random_row(rng, V, 2.f);
  // An old caller's struct ends before allowed_token_masks: whatever follows it in memory is
  // not read.
  const size_t old_size = offsetof(dds_sample_args, allowed_token_masks);
  dds_sample_args a;
  std::memset(&a, 0, sizeof a);
  REQUIRE(dds_sample_args_init(&a, old_size) == DDS_OK);
  CHECK(a.struct_size == old_size);
  int32_t tok = -1, tok_new = -2;
  a.num_rows = 1;
  a.logits = logits.data();
  a.tokens = &tok;
  a.seed = 3;
  a.allowed_token_masks = reinterpret_cast<const int32_t*>(0x1);  // garbage beyond old_size
  a.allowed_mask_stride = -3;
  REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
  dds_sample_args b = tu::sample_args();
  b.num_rows = 1;
  b.logits = logits.data();
  b.tokens = &tok_new;
  b.seed = 3;
  REQUIRE(dds_sample(s, &b, nullptr) == DDS_OK);
  CHECK(tok == tok_new);
  CHECK(dds_sample_args_init(&a, old_size - 1) == DDS_ERR_STRUCT_SIZE);

  dds_stash_args st;
  CHECK(dds_stash_args_init(&st, offsetof(dds_stash_args, allowed_token_masks)) == DDS_OK);
  dds_verify_args v;
  CHECK(dds_verify_args_init(&v, offsetof(dds_verify_args, allowed_token_masks)) == DDS_OK);
  CHECK(dds_verify_args_init(&v, offsetof(dds_verify_args, allowed_token_masks) - 1) ==
        DDS_ERR_STRUCT_SIZE);
}
