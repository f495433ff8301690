// dds_sample_args as the shard code's arguments (shard::Args): the one translation from the public
// API to kernels/shard (used by the CPU reference and the CUDA backend, src/shard.cpp, and the host
// emulation of the kernels, tests/emu), and the compile-time check that the values kernels/shard
// restates from the public headers match them.
#ifndef DDS_SRC_SHARD_PARAMS_H_
#define DDS_SRC_SHARD_PARAMS_H_

#include "dds/dds_shard.h"
#include "shard/shard.cuh"

namespace dds {

static_assert(shard::kF32 == DDS_DTYPE_F32 && shard::kBF16 == DDS_DTYPE_BF16 &&
                  shard::kF16 == DDS_DTYPE_F16, "kernels/shard/records.h: dds_dtype");
static_assert(shard::kStatsGuided == DDS_STATS_GUIDED, "kernels/shard/records.h: dds_stats_mode");
static_assert(shard::kRoundStats == DDS_SHARD_ROUND_STATS &&
                  shard::kRoundRadix == DDS_SHARD_ROUND_RADIX &&
                  shard::kRoundKept == DDS_SHARD_ROUND_KEPT,
              "kernels/shard/records.h: dds_shard_round_kind");
static_assert(shard::kMaxTopK == DDS_SHARD_MAX_TOP_K &&
                  shard::kMaxWorld == DDS_SHARD_MAX_WORLD_SIZE &&
                  shard::kMaxRounds == DDS_SHARD_MAX_ROUNDS,
              "kernels/shard/records.h: DDS_SHARD_MAX_*");

// The arguments, validated and normalised (strides resolved) by the caller.
inline shard::Args shard_args(const dds_sample_args& a) {
  shard::Args s;
  s.num_rows = a.num_rows;
  s.num_requests = a.num_requests;
  s.row_offsets = a.row_offsets;
  s.positions = a.positions;
  s.logits = a.logits;
  s.dtype = a.dtype;
  s.row_stride = a.row_stride;
  s.uncond_logits = a.uncond_logits;
  s.uncond_row_stride = a.uncond_row_stride;
  s.uncond_num_rows = a.uncond_num_rows;
  s.uncond_row_offsets = a.uncond_row_offsets;
  s.vals = rule::values_of(a);
  s.banned_token = a.banned_token;
  s.stats = a.stats;
  s.out = outputs_of(a);
  return s;
}

}  // namespace dds

#endif  // DDS_SRC_SHARD_PARAMS_H_
