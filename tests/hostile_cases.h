// The hostile device-resident row_offsets of issue #26 and what the rule of docs/sampling.md §1
// makes of them, written out by hand (not computed by the library's code): for 64 rows and 4
// requests, the requests flagged DDS_REQ_BAD_ROW_OFFSETS and, per row, its request find(i), whether
// that request owns it, and the row's position key (i - row_offsets[r] for an owned row, i for an
// orphan); the calls' other inputs, the same in both tests. Shared by
// tests/cpu/test_hostile_values.cpp and tests/gpu/test_gpu_hostile.cu.
#ifndef DDS_TESTS_HOSTILE_CASES_H_
#define DDS_TESTS_HOSTILE_CASES_H_

#include <dds/dds.h>
#include <stdint.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace hostile {

constexpr int32_t kRows = 64, kReqs = 4;
constexpr int32_t kBadOffsets = 2048;  // DDS_REQ_BAD_ROW_OFFSETS

// Rows [begin, end) go to `request`; owned: that request owns them (key i - key_base), else they
// are orphans (key i, key_base 0).
struct Segment {
  int32_t begin, end, request;
  bool owned;
  int32_t key_base;
};

struct OffsetsCase {
  const char* name;
  int32_t offs[kReqs + 1];
  int32_t flagged[kReqs];  // expected DDS_REQ_BAD_ROW_OFFSETS bit per request
  int32_t num_segments;
  Segment seg[2];
};

// find(i): lo = 0, hi = 4; mid = 2, then mid = 1 or 3 (kernels/common/offsets.h).
inline const OffsetsCase* cases(int32_t* n) {
  static const OffsetsCase c[] = {
      // r0 [0,5) good; r1 [5,3) reversed; r2 [3,1000000) and r3 [1000000,64) outside [0,64].
      // Rows >= 3: offs[2] = 3 <= i, offs[3] > i -> r2 (flagged): rows 3, 4 of r0's range are
      // orphans.
      {"[0, 5, 3, 1000000, 64]",
       {0, 5, 3, 1000000, 64},
       {0, kBadOffsets, kBadOffsets, kBadOffsets},
       2,
       {{0, 3, 0, true, 0}, {3, 64, 2, false, 0}}},
      // r0 [0,-7), r1 [-7,2^30), r2 [2^30,10) flagged; r3 [10,64) good but every row's search
      // stops at r1 (offs[2] = 2^30 > i, offs[1] = -7 <= i): r3 owns nothing.
      {"[0, -7, 2^30, 10, 64]",
       {0, -7, 1 << 30, 10, 64},
       {kBadOffsets, kBadOffsets, kBadOffsets, 0},
       1,
       {{0, 64, 1, false, 0}, {0, 0, 0, false, 0}}},
      // r0 [64,0) and r2 [32,16) flagged; r1 [0,32) owns rows 0..31; r3 [16,64) owns 32..63
      // (rows 16..31 of its range are r1's).
      {"[64, 0, 32, 16, 64]",
       {64, 0, 32, 16, 64},
       {kBadOffsets, 0, kBadOffsets, 0},
       2,
       {{0, 32, 1, true, 0}, {32, 64, 3, true, 16}}},
      // Every request flagged; offs[2] = 0 and offs[3] = -2^31 are <= every row: all rows are r3's
      // orphans.
      {"[0, 2^31-1, 0, -2^31, 64]",
       {0, INT32_MAX, 0, INT32_MIN, 64},
       {kBadOffsets, kBadOffsets, kBadOffsets, kBadOffsets},
       1,
       {{0, 64, 3, false, 0}, {0, 0, 0, false, 0}}},
  };
  *n = (int32_t)(sizeof c / sizeof c[0]);
  return c;
}

// The segment of row i in case c.
inline const Segment& segment_of(const OffsetsCase& c, int32_t i) {
  for (int32_t s = 0; s < c.num_segments; ++s)
    if (i >= c.seg[s].begin && i < c.seg[s].end) return c.seg[s];
  return c.seg[0];  // unreachable: the segments cover [0, kRows)
}

// The per-request parameters of the row_offsets cases' calls.
constexpr float kTemps[kReqs] = {1.f, 0.7f, 1.3f, 0.9f};
constexpr uint64_t kSeeds[kReqs] = {11, 22, 33, 44};
constexpr int32_t kTopKs[kReqs] = {5, 3, 0, 7};
constexpr float kTopPs[kReqs] = {1.f, 0.9f, 0.8f, 1.f};
constexpr int32_t kStashTop = 3, kRevealCount = 2;

// Distinct reveal scores of the kRows rows.
inline float reveal_score(int32_t i) { return (float)((i * 37) % kRows) / kRows; }

// dds_stash_logprobs over the kRows rows of a case: the top kStashTop of each row into slot
// `request`, row i - row_offsets[request]. The arrays are host or device memory.
inline void set_offsets_stash(dds_stash_args* a, const int32_t* offs, const float* logits,
                              const float* temperatures) {
  a->num_rows = kRows;
  a->num_requests = kReqs;
  a->row_offsets = offs;
  a->logits = logits;
  a->temperatures = temperatures;
  a->num_top = kStashTop;
  a->num_slots = kReqs;
  a->rows_per_slot = kRows;
}

// dds_reveal over the kRows rows of a case: the kRevealCount best-scoring rows per request.
inline void set_offsets_reveal(dds_reveal_args* a, const int32_t* offs, const float* scores) {
  a->num_rows = kRows;
  a->num_requests = kReqs;
  a->row_offsets = offs;
  a->scores = scores;
  a->policy = DDS_REVEAL_TOP_N;
  a->count = kRevealCount;
}

// dds_verify_drafts over R requests of n drafts with the draft counts, tokens and logits given,
// into accepted / out_tokens (host or device arrays).
inline void set_verify(dds_verify_args* a, int32_t R, int32_t n, const int32_t* counts,
                       const int32_t* drafts, const float* draft_logits, const float* target_logits,
                       int32_t* accepted, int32_t* out_tokens) {
  a->num_requests = R;
  a->num_drafts = n;
  a->draft_counts = counts;
  a->draft_tokens = drafts;
  a->draft_logits = draft_logits;
  a->target_logits = target_logits;
  a->accepted_counts = accepted;
  a->out_tokens = out_tokens;
}

// Draft tokens: each draft row's argmax (the draft model's choice, often accepted).
inline std::vector<int32_t> argmax_drafts(const std::vector<float>& draft_logits, int32_t V) {
  std::vector<int32_t> drafts(draft_logits.size() / (size_t)V);
  for (size_t q = 0; q < drafts.size(); ++q) {
    const float* row = draft_logits.data() + q * V;
    drafts[q] = (int32_t)(std::max_element(row, row + V) - row);
  }
  return drafts;
}

// The other device-resident values (docs/sampling.md §1, the table's last three bits), for
// kReqs requests of 2 rows each: stash token ids outside [0, V) and num_token_ids outside
// [0, num_top], committed tokens outside [0, V), verify drafts outside [0, V), bad reveal
// parameters; with the status words the rule gives.
namespace bad_ids {
constexpr int32_t kNumRows = 8, kTop = 3, kNumDrafts = 4;
constexpr int32_t kOffsets[kReqs + 1] = {0, 2, 4, 6, 8};
// Request 0: num_token_ids -1; request 1: id -5; request 2: num_token_ids 9 > num_top.
constexpr int32_t kTokenIds[kReqs * kTop] = {1, 2, 3, 4, -5, 6, 7, 8, 9, 10, 11, 12};
constexpr int32_t kNumTokenIds[kReqs] = {-1, 2, 9, 3};
constexpr int32_t kStashStatus[kReqs] = {DDS_REQ_BAD_NUM_TOKEN_IDS, DDS_REQ_BAD_TOKEN_ID,
                                         DDS_REQ_BAD_NUM_TOKEN_IDS, 0};
// Committed tokens: row 3 (request 1, stashed) = V, row 7 (request 3, row 1 not stashed:
// num_valid 1) = -1.
inline std::vector<int32_t> committed(int32_t V) { return {0, 1, 2, V, 4, 5, 6, -1}; }
constexpr int32_t kNumValid[kReqs] = {2, 2, 2, 1};
// Verify: request 0's first draft -1 (used: flagged, rejected); request 1's 4th draft V is
// beyond its count 2 (unused: not flagged).
inline std::vector<int32_t> drafts(int32_t V) {
  std::vector<int32_t> d((size_t)kReqs * kNumDrafts, 3);
  d[0] = -1;
  d[(size_t)1 * kNumDrafts + 3] = V;
  return d;
}
constexpr int32_t kCounts[kReqs] = {2, 2, 4, 0};
constexpr int32_t kVerifyStatus[kReqs] = {DDS_REQ_BAD_TOKEN_ID, 0, 0, 0};
// Reveal: NaN threshold (request 0), negative factor (1), +inf position temperature (2: off,
// allowed like the host scalar), negative position temperature (3).
constexpr float kThresholds[kReqs] = {std::numeric_limits<float>::quiet_NaN(), 0.5f, 0.5f, 0.5f};
constexpr float kFactors[kReqs] = {1.f, -0.5f, 1.f, 1.f};
constexpr float kPositionTemps[kReqs] = {0.f, 0.f, std::numeric_limits<float>::infinity(), -1.f};
constexpr int32_t kRevealStatus[kReqs] = {DDS_REQ_BAD_REVEAL_PARAM, DDS_REQ_BAD_REVEAL_PARAM, 0,
                                          DDS_REQ_BAD_REVEAL_PARAM};
}  // namespace bad_ids

// Verify: the hostile draft counts for n = 4 drafts (and one valid control), the counts the rule
// uses and the bits it sets.
constexpr int32_t kDrafts = 4, kVerifyReqs = 4;
constexpr int32_t kDraftCounts[kVerifyReqs] = {-3, 99, 1 << 30, 2};
constexpr int32_t kDraftCountsUsed[kVerifyReqs] = {0, 4, 4, 2};
constexpr int32_t kBadDraftCount = 4096;  // DDS_REQ_BAD_DRAFT_COUNT

}  // namespace hostile

#endif  // DDS_TESTS_HOSTILE_CASES_H_
