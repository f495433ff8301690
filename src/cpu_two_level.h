// The two-level Gumbel-max of docs/sampling.md §4 on the host, shared by the CPU backend
// (dds_sample: salts BLOCK / TOKEN) and the CPU dds_verify_drafts (salts VBL1 / VTK1).
//
// The arithmetic of the choice is fixed (float64 block scores lse(block) + G(block) and token
// scores w(t) + G(t), ties to the lower id; dds_sample's lse from fp32 block sums, cpu_vec.h,
// dds_verify_drafts' from float64 sums in id order); what is fast here is the winning block's token
// search: its 64-bit Philox draws come in one vectorised batch (random_bits_batch), and the
// float64 Gumbel (two logarithms) is evaluated only for tokens that can still win. A Gumbel from
// the uniform u is G = -log(-log1p(-u)) <= -log(u), and -log(u) is bounded within ln 2 by the
// exponent of the bits' top 24 (gumbel_upper_bound), so a token whose w(t) plus that bound is
// below the best score so far cannot win; about one token in a thousand of a flat block needs its
// exact Gumbel.
#ifndef DDS_SRC_CPU_TWO_LEVEL_H_
#define DDS_SRC_CPU_TWO_LEVEL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "rng.h"

namespace dds {

// out[i] = random_bits(seed, step, position, id0 + i, salt) for i in [0, n): one Philox4x32-10
// per id, batched so that the compiler vectorises it (AVX2 / AVX-512 where the CPU has them,
// chosen once at load time; integer arithmetic, so the bits are the same on every path).
void random_bits_batch(uint64_t seed, uint32_t step, uint32_t position, uint32_t id0, int32_t n,
                       uint32_t salt, uint64_t* out);

// An upper bound, in float64 and above any rounding of the computed value, of
// bits_to_gumbel(bits), from the top 24 bits v = bits >> 40 alone (so that the loop over a block
// vectorises): u >= v 2^-24 >= 2^(floor(log2 v) - 24), so G <= -log(u) <= (24 - floor(log2 v))
// ln 2; for v = 0, u >= 2^-53 and G <= 53 ln 2 < 37. floor(log2 v) is the exponent of (float)v
// (exact: v < 2^24).
inline double gumbel_upper_bound(uint64_t bits) {
  const int32_t v = (int32_t)(bits >> 40);
  const float f = (float)v;
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  const int32_t e = (int32_t)(fb >> 23) - 127;  // floor(log2 v); -127 for v = 0
  return v != 0 ? (double)(24 - e) * 0.6931471805599453 + 1e-6 : 37.0;
}

// The winning block: argmax_b (lse_b + G(b)) over the blocks with a kept column, ties to the
// lower block; block_lse(b, &lse_b) returns false for a block without one, else its
// log-sum-exp lse_b in float64. -1 when no block has a kept column.
template <typename BlockLse>
int32_t pick_block(int32_t num_blocks, BlockLse block_lse, uint64_t seed, uint32_t step,
                   uint32_t pos, uint32_t block_salt) {
  int32_t best_block = -1;
  double best = -std::numeric_limits<double>::infinity();
  for (int32_t b = 0; b < num_blocks; ++b) {
    double lse = 0;
    if (!block_lse(b, &lse)) continue;
    const double score = lse + gumbel(seed, step, pos, (uint32_t)b, block_salt);
    if (best_block < 0 || score > best) {
      best = score;
      best_block = b;
    }
  }
  return best_block;
}

// argmax over t in [lo, hi) with w(t) > -inf of w(t) + G(t) (G with token_salt), ties to the
// lower id, in float64; the same token as evaluating every G(t) in id order. -1 when no column
// of the range is kept. hi - lo <= kBlockSize.
template <typename LogWeight>
int32_t pick_token(int32_t lo, int32_t hi, LogWeight w, uint64_t seed, uint32_t step,
                   uint32_t pos, uint32_t token_salt) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  uint64_t bits[kBlockSize];
  double ub[kBlockSize];
  const int32_t n = hi - lo;
  random_bits_batch(seed, step, pos, (uint32_t)lo, n, token_salt, bits);
  // w(t) + bound is -inf exactly where w(t) is (the bound is finite).
  for (int32_t i = 0; i < n; ++i) ub[i] = w(lo + i) + gumbel_upper_bound(bits[i]);
  double top = kNegInf;
  for (int32_t i = 0; i < n; ++i) top = ub[i] > top ? ub[i] : top;
  if (!(top > kNegInf)) return -1;
  int32_t s = 0;
  while (!(ub[s] == top)) ++s;
  // Seed with the most promising token, then evaluate only tokens whose bound reaches the best
  // score: a pruned token's computed score is below it (fl is monotone), so it cannot win.
  int32_t best_i = s;
  double best_v = w(lo + s) + bits_to_gumbel(bits[s]);
  for (int32_t i = 0; i < n; ++i) {
    if (i == s || !(ub[i] >= best_v)) continue;
    const double v = w(lo + i) + bits_to_gumbel(bits[i]);
    if (v > best_v || (v == best_v && i < best_i)) {
      best_v = v;
      best_i = i;
    }
  }
  return lo + best_i;
}

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
  // Each block's m + log(sum exp(w - m)), the sum in id order.
  auto block_lse = [&](int32_t b, double* lse) {
    const int32_t lo = b * kBlockSize, hi = std::min(V, lo + kBlockSize);
    bool any = false;
    double s = 0;
    for (int32_t t = lo; t < hi; ++t) {
      const double x = w(t);
      if (x > kNegInf) {
        s += std::exp(x - m);
        any = true;
      }
    }
    *lse = m + std::log(s);
    return any;
  };
  const int32_t best_block =
      pick_block((V - 1) / kBlockSize + 1, block_lse, seed, step, pos, block_salt);
  const int32_t lo = best_block * kBlockSize, hi = std::min(V, lo + kBlockSize);
  return pick_token(lo, hi, w, seed, step, pos, token_salt);
}

}  // namespace dds

#endif  // DDS_SRC_CPU_TWO_LEVEL_H_
