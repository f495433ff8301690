// random_bits_batch (cpu_two_level.h): Philox4x32-10 for a run of consecutive ids, written as
// vector lanes: AVX-512 (8 ids per vector) or AVX2 (4), with the 32 x 32 -> 64-bit products of
// vpmuludq, else 16 plain lanes for the baseline ISA; picked once by CPU feature at load time.
// Integer arithmetic only, so every path returns the bits of kernels/common/rng.h's random_bits (and
// tests/cpu/test_cpu_fast.cpp checks them against it).
#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "cpu_two_level.h"

namespace dds {
namespace {

constexpr int kLanes = 16;

// random_bits for ids id0 .. id0 + kLanes - 1 (kernels/common/rng.h: key = seed, counter = (id,
// position, step, salt), bits = x0 | x1 << 32).
__attribute__((always_inline)) inline void philox_lanes(uint64_t seed, uint32_t step, uint32_t position, uint32_t id0,
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
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int i = 0; i < kLanes; ++i) {
      const uint64_t p0 = (uint64_t)0xD2511F53u * c0[i];
      const uint64_t p1 = (uint64_t)0xCD9E8D57u * c2[i];
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

__attribute__((always_inline)) inline void batch(uint64_t seed, uint32_t step, uint32_t position, uint32_t id0, int32_t n,
                  uint32_t salt, uint64_t* out) {
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) philox_lanes(seed, step, position, id0 + (uint32_t)i, salt, out + i);
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Philox rounds on 64-bit lanes that hold the 32-bit words in their low halves: vpmuludq reads
// only the low halves, so the high halves may hold anything until the final packing.
#define DDS_PHILOX_ROUNDS(V, MUL, SRL, XOR, SET1)                                     \
  do {                                                                                 \
    const V m0 = SET1(0xD2511F53u), m1 = SET1(0xCD9E8D57u);                            \
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);                         \
    for (int r = 0; r < 10; ++r) {                                                     \
      if (r > 0) {                                                                     \
        k0 += 0x9E3779B9u;                                                             \
        k1 += 0xBB67AE85u;                                                             \
      }                                                                                \
      const V kk0 = SET1(k0), kk1 = SET1(k1);                                          \
      for (int u = 0; u < kU; ++u) {                                                   \
        const V p0 = MUL(c0[u], m0), p1 = MUL(c2[u], m1);                              \
        c0[u] = XOR(XOR(SRL(p1, 32), c1[u]), kk0);                                     \
        c2[u] = XOR(XOR(SRL(p0, 32), c3[u]), kk1);                                     \
        c1[u] = p1;                                                                    \
        c3[u] = p0;                                                                    \
      }                                                                                \
    }                                                                                  \
  } while (0)

__attribute__((target("avx2"))) void batch_avx2(uint64_t seed, uint32_t step, uint32_t position,
                                                uint32_t id0, int32_t n, uint32_t salt,
                                                uint64_t* out) {
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  const __m256i lo32 = _mm256_set1_epi64x(0xffffffffll);
  constexpr int kU = 4;  // independent vectors in flight (the rounds are a dependency chain)
  for (int32_t i = 0; i < n; i += 4 * kU) {
    __m256i c0[kU], c1[kU], c2[kU], c3[kU];
    for (int u = 0; u < kU; ++u) {
      c0[u] = _mm256_add_epi64(
          _mm256_set1_epi64x((long long)(uint32_t)(id0 + (uint32_t)(i + 4 * u))), lane);
      c1[u] = _mm256_set1_epi64x(position);
      c2[u] = _mm256_set1_epi64x(step);
      c3[u] = _mm256_set1_epi64x(salt);
    }
#define DDS_SET1_256(x) _mm256_set1_epi64x((long long)(x))
    DDS_PHILOX_ROUNDS(__m256i, _mm256_mul_epu32, _mm256_srli_epi64, _mm256_xor_si256, DDS_SET1_256);
#undef DDS_SET1_256
    alignas(32) uint64_t bits[4 * kU];
    for (int u = 0; u < kU; ++u)
      _mm256_store_si256(reinterpret_cast<__m256i*>(bits + 4 * u),
                         _mm256_or_si256(_mm256_and_si256(c0[u], lo32), _mm256_slli_epi64(c1[u], 32)));
    std::memcpy(out + i, bits, sizeof(uint64_t) * (size_t)std::min<int32_t>(4 * kU, n - i));
  }
}

__attribute__((target("avx512f"))) void batch_avx512(uint64_t seed, uint32_t step,
                                                     uint32_t position, uint32_t id0, int32_t n,
                                                     uint32_t salt, uint64_t* out) {
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i lo32 = _mm512_set1_epi64(0xffffffffll);
  constexpr int kU = 4;
  for (int32_t i = 0; i < n; i += 8 * kU) {
    __m512i c0[kU], c1[kU], c2[kU], c3[kU];
    for (int u = 0; u < kU; ++u) {
      c0[u] = _mm512_add_epi64(
          _mm512_set1_epi64((long long)(uint32_t)(id0 + (uint32_t)(i + 8 * u))), lane);
      c1[u] = _mm512_set1_epi64(position);
      c2[u] = _mm512_set1_epi64(step);
      c3[u] = _mm512_set1_epi64(salt);
    }
#define DDS_SET1_512(x) _mm512_set1_epi64((long long)(x))
    DDS_PHILOX_ROUNDS(__m512i, _mm512_mul_epu32, _mm512_srli_epi64, _mm512_xor_si512, DDS_SET1_512);
#undef DDS_SET1_512
    alignas(64) uint64_t bits[8 * kU];
    for (int u = 0; u < kU; ++u)
      _mm512_store_si512(bits + 8 * u,
                         _mm512_or_si512(_mm512_and_si512(c0[u], lo32), _mm512_slli_epi64(c1[u], 32)));
    std::memcpy(out + i, bits, sizeof(uint64_t) * (size_t)std::min<int32_t>(8 * kU, n - i));
  }
}
#undef DDS_PHILOX_ROUNDS

BatchFn choose_batch() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return batch_avx512;
  if (__builtin_cpu_supports("avx2")) return batch_avx2;
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
