// The hostile device-resident row_offsets of issue #26 and what the rule of docs/sampling.md §1
// makes of them, written out by hand (not computed by the library's code): for 64 rows and 4
// requests, the requests flagged DDS_REQ_BAD_ROW_OFFSETS and, per row, its request find(i), whether
// that request owns it, and the row's position key (i - row_offsets[r] for an owned row, i for an
// orphan). Shared by tests/cpu/test_hostile_values.cpp and tests/gpu/test_gpu_hostile.cu.
#ifndef DDS_TESTS_HOSTILE_CASES_H_
#define DDS_TESTS_HOSTILE_CASES_H_

#include <stdint.h>

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

// Verify: the hostile draft counts for n = 4 drafts (and one valid control), the counts the rule
// uses and the bits it sets.
constexpr int32_t kDrafts = 4, kVerifyReqs = 4;
constexpr int32_t kDraftCounts[kVerifyReqs] = {-3, 99, 1 << 30, 2};
constexpr int32_t kDraftCountsUsed[kVerifyReqs] = {0, 4, 4, 2};
constexpr int32_t kBadDraftCount = 4096;  // DDS_REQ_BAD_DRAFT_COUNT

}  // namespace hostile

#endif  // DDS_TESTS_HOSTILE_CASES_H_
