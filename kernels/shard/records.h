// Vocabulary-parallel sampling: the protocol's constants and record layouts (docs/vocab_parallel.md
// §3), and the values of the public headers (include/dds/dds.h, dds_shard.h) that the shard code
// uses, restated here so that kernels/ does not include the public API; src/shard_params.h
// checks each against the public header at compile time.
#ifndef DDS_KERNELS_SHARD_RECORDS_H_
#define DDS_KERNELS_SHARD_RECORDS_H_

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__CUDACC__)
#include <cmath>
#endif

#include "../common/dtype.h"
#include "../common/rng.h"
#include "../common/status.h"  // the DDS_REQ_* bits

namespace dds {
namespace shard {

// Public values (checked against include/dds/*.h in src/shard_params.h).
constexpr int32_t kF32 = kDtypeF32, kBF16 = kDtypeBF16, kF16 = kDtypeF16;  // dds_dtype
constexpr int32_t kStatsGuided = 1;               // DDS_STATS_GUIDED
constexpr int32_t kRoundStats = 0, kRoundRadix = 1, kRoundKept = 2;  // dds_shard_round_kind
constexpr int kMaxTopK = 1024;  // DDS_SHARD_MAX_TOP_K
constexpr int kMaxWorld = 64;   // DDS_SHARD_MAX_WORLD_SIZE
constexpr int kMaxRounds = 8;   // DDS_SHARD_MAX_ROUNDS

constexpr int kRadixRounds = 4;
constexpr int kBins = 256;
constexpr uint32_t kMagic = 0x30534444u;  // "DDS0" little-endian

// ---------------------------------------------------------------------------------------------
// Record layouts (docs/vocab_parallel.md §3). Little-endian, natural alignment, every row record a
// multiple of 8 bytes. Changing any of these changes the protocol: bump kMagic.
// ---------------------------------------------------------------------------------------------
struct Winner {   // token winner of one block (or block part): argmax (a_t + G_t), ties lower id
  int32_t id;     // global token id, -1 = none
  float a;        // processed value a_t (fp32)
  float l;        // guided value l_t (fp32)
  int32_t pad;
  double key;     // (double)a_t + G(seed, step, pos, t, TOKEN)
};
struct BlockPart {  // one block's share
  int32_t block;    // global block id, -1 = none
  int32_t pad;
  double value;     // full block: score m_ref + log(s) + G_b; cut block: s = sum exp(a - m_ref)
  Winner win;
};
struct Share {       // a rank's share of the two-level sampler over one set of columns
  double m_ref;      // reference of the sums (round 0: the rank's max a; round KEPT: global max)
  BlockPart full;    // best block lying entirely in the slice (score, then lower block id)
  BlockPart cut[2];  // blocks cut by the slice boundaries (at most two; block -1 = none)
};
struct StatsHead {
  uint32_t magic;
  int32_t vocab_offset, vocab_slice;
  int32_t n0;      // finite, unbanned columns in the slice (|K0 ∩ slice|)
  int32_t n_cand;  // candidates that follow (<= C)
  int32_t top_l_id[2];
  float top_l[2];  // top-2 of l over K0 ∩ slice, order (value desc, id asc); id -1 = none
  int32_t top_a_id[2];
  float top_a[2];  // top-2 of a (processed values; = l for greedy rows)
  int32_t pad;
  double zl, wl;   // sum e, sum e (l - top_l[0]) with e = exp(l - top_l[0]) over K0 ∩ slice
  double za, wa;   // the same for a relative to top_a[0]
  Share share;     // over K0 ∩ slice, m_ref = top_a[0]
};
struct Cand {  // top-k candidate
  float a;
  int32_t id;
};
struct RadixRec {
  uint32_t count[kBins];
  double mass[kBins];
};
struct KeptRec {
  int32_t count;  // |K ∩ slice|
  int32_t pad;
  double z, w;    // sum e, sum e (a - M) with e = exp(a - M) over K ∩ slice, M the global max
  Share share;    // over K ∩ slice, m_ref = M
};
static_assert(sizeof(Winner) == 24, "layout");
static_assert(sizeof(BlockPart) == 40, "layout");
static_assert(sizeof(Share) == 128, "layout");
static_assert(sizeof(StatsHead) == 216, "layout");
static_assert(sizeof(Cand) == 8, "layout");
static_assert(sizeof(RadixRec) == 3072, "layout");
static_assert(sizeof(KeptRec) == 152, "layout");
static_assert(offsetof(StatsHead, n_cand) == 16 && offsetof(StatsHead, top_l_id) == 20 &&
                  offsetof(StatsHead, top_l) == 28 && offsetof(StatsHead, top_a_id) == 36 &&
                  offsetof(StatsHead, top_a) == 44 && offsetof(StatsHead, zl) == 56 &&
                  offsetof(StatsHead, wa) == 80 && offsetof(StatsHead, share) == 88,
              "layout");
static_assert(offsetof(Share, full) == 8 && offsetof(Share, cut) == 48, "layout");
static_assert(offsetof(BlockPart, value) == 8 && offsetof(BlockPart, win) == 16, "layout");
static_assert(offsetof(Winner, l) == 8 && offsetof(Winner, key) == 16, "layout");
static_assert(offsetof(RadixRec, mass) == 1024, "layout");
static_assert(offsetof(KeptRec, z) == 8 && offsetof(KeptRec, share) == 24, "layout");

}  // namespace shard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_RECORDS_H_
