// random_bits_batch (cpu_two_level.h): Philox4x32-10 for a run of consecutive ids, written as
// vector lanes: AVX-512 (8 ids per vector) or AVX2 (4), with the 32 x 32 -> 64-bit products of
// vpmuludq, else 16 plain lanes for the baseline ISA; picked once by CPU feature at load time.
// Integer arithmetic only, so every path returns the bits of kernels/common/rng.h's random_bits
// (and tests/cpu/test_cpu_fast.cpp checks them against it).
#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "cpu_two_level.h"
#include "cpu_vec.h"  // DDS_TARGET_BEGIN / DDS_TARGET_END

namespace dds {
namespace {

constexpr int kLanes = 16;

// random_bits for ids id0 .. id0 + kLanes - 1 (kernels/common/rng.h: key = seed, counter = (id,
// position, step, salt), bits = x0 | x1 << 32).
__attribute__((always_inline)) inline void philox_lanes(uint64_t seed, uint32_t step,
                                                        uint32_t position, uint32_t id0,
                                                        uint32_t salt, uint64_t* out) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    c0[i] = id0 + (uint32_t)i;
    c1[i] = position;
    c2[i] = step;
    c3[i] = salt;
  }
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    for (int i = 0; i < kLanes; ++i) {
      const uint64_t p0 = (uint64_t)kPhiloxM0 * c0[i];
      const uint64_t p1 = (uint64_t)kPhiloxM1 * c2[i];
      const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[i] ^ k0;
      const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[i] ^ k1;
      c0[i] = n0;
      c1[i] = (uint32_t)p1;
      c2[i] = n2;
      c3[i] = (uint32_t)p0;
    }
  }
  for (int i = 0; i < kLanes; ++i) out[i] = (uint64_t)c0[i] | ((uint64_t)c1[i] << 32);
}

__attribute__((always_inline)) inline void batch(uint64_t seed, uint32_t step, uint32_t position,
                                                 uint32_t id0, int32_t n, uint32_t salt,
                                                 uint64_t* out) {
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    philox_lanes(seed, step, position, id0 + (uint32_t)i, salt, out + i);
  if (i < n) {
    uint64_t tail[kLanes];
    philox_lanes(seed, step, position, id0 + (uint32_t)i, salt, tail);
    std::memcpy(out + i, tail, sizeof(uint64_t) * (size_t)(n - i));
  }
}

using BatchFn = void (*)(uint64_t, uint32_t, uint32_t, uint32_t, int32_t, uint32_t, uint64_t*);

void batch_baseline(uint64_t seed, uint32_t step, uint32_t position, uint32_t id0, int32_t n,
                    uint32_t salt, uint64_t* out) {
  batch(seed, step, position, id0, n, salt, out);
}

#ifdef DDS_TARGET_BEGIN
// The 64-bit lanes hold the 32-bit Philox words in their low halves: vpmuludq reads only the low
// halves (cpu_rng_lanes.inc). The operations that AVX2 and AVX-512 spell alike: intrinsics prefix
// P (_mm256, _mm512) and integer vector suffix SI (si256, si512).
#define DDS_RNG_LANE_OPS(P, SI)                                                      \
  static V add(V a, V b) { return P##_add_epi64(a, b); }                             \
  static V mul32(V a, V b) { return P##_mul_epu32(a, b); }                           \
  static V srl32(V a) { return P##_srli_epi64(a, 32); }                              \
  static V xor_(V a, V b) { return P##_xor_##SI(a, b); }                             \
  static V pack(V lo, V hi) {                                                        \
    return P##_or_##SI(P##_and_##SI(lo, set1(0xffffffffu)), P##_slli_epi64(hi, 32)); \
  }                                                                                  \
  static void store(uint64_t* p, V v) { P##_store_##SI(reinterpret_cast<V*>(p), v); }

DDS_TARGET_BEGIN("avx2")
namespace avx2_path {
struct Lanes {
  using V = __m256i;
  static constexpr int kIds = 4;
  static V set1(uint64_t x) { return _mm256_set1_epi64x((long long)x); }
  static V ids() { return _mm256_setr_epi64x(0, 1, 2, 3); }
  DDS_RNG_LANE_OPS(_mm256, si256)
};
#include "cpu_rng_lanes.inc"
}  // namespace avx2_path
DDS_TARGET_END

DDS_TARGET_BEGIN("avx512f")
namespace avx512_path {
struct Lanes {
  using V = __m512i;
  static constexpr int kIds = 8;
  static V set1(uint64_t x) { return _mm512_set1_epi64((long long)x); }
  static V ids() { return _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7); }
  DDS_RNG_LANE_OPS(_mm512, si512)
};
#include "cpu_rng_lanes.inc"
}  // namespace avx512_path
DDS_TARGET_END
#undef DDS_RNG_LANE_OPS

BatchFn choose_batch() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return avx512_path::philox_batch<avx512_path::Lanes>;
  if (__builtin_cpu_supports("avx2")) return avx2_path::philox_batch<avx2_path::Lanes>;
  return batch_baseline;
}
#else
BatchFn choose_batch() { return batch_baseline; }
#endif

const BatchFn g_batch = choose_batch();

}  // namespace

void random_bits_batch(uint64_t seed, uint32_t step, uint32_t position, uint32_t id0, int32_t n,
                       uint32_t salt, uint64_t* out) {
  g_batch(seed, step, position, id0, n, salt, out);
}

}  // namespace dds
