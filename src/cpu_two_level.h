// The two-level Gumbel-max of docs/sampling.md §4 on the host, shared by the CPU backend
// (dds_sample: salts BLOCK / TOKEN) and the CPU dds_verify_drafts (salts VBL1 / VTK1).
#ifndef DDS_SRC_CPU_TWO_LEVEL_H_
#define DDS_SRC_CPU_TWO_LEVEL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "rng.h"

namespace dds {

// Samples a column of [0, V) with probability proportional to exp(w(t)); w(t) = -inf excludes
// t. Block scores m + log(sum exp(w - m)) + G(block) and token scores w(t) + G(t) in float64,
// ties to the lower id. Returns 0 when every column is excluded.
template <typename LogWeight>
int32_t two_level_gumbel_max(int32_t V, LogWeight w, uint64_t seed, uint32_t step, uint32_t pos,
                             uint32_t block_salt, uint32_t token_salt) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  double m = kNegInf;
  for (int32_t t = 0; t < V; ++t) m = std::max(m, w(t));
  if (m == kNegInf) return 0;
  int32_t best_block = -1;
  double best = kNegInf;
  for (int32_t b = 0; b * kBlockSize < V; ++b) {
    const int32_t lo = b * kBlockSize, hi = std::min(V, lo + kBlockSize);
    double s = 0;
    bool any = false;
    for (int32_t t = lo; t < hi; ++t) {
      const double x = w(t);
      if (x > kNegInf) {
        s += std::exp(x - m);
        any = true;
      }
    }
    if (!any) continue;
    const double score = m + std::log(s) + gumbel(seed, step, pos, (uint32_t)b, block_salt);
    if (best_block < 0 || score > best) {
      best = score;
      best_block = b;
    }
  }
  const int32_t lo = best_block * kBlockSize, hi = std::min(V, lo + kBlockSize);
  int32_t token = -1;
  double best_v = kNegInf;
  for (int32_t t = lo; t < hi; ++t) {
    const double x = w(t);
    if (!(x > kNegInf)) continue;
    const double v = x + gumbel(seed, step, pos, (uint32_t)t, token_salt);
    if (token < 0 || v > best_v) {
      best_v = v;
      token = t;
    }
  }
  return token;
}

}  // namespace dds

#endif  // DDS_SRC_CPU_TWO_LEVEL_H_
