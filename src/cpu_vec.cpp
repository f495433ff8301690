// cpu_vec.h: the per-column float work of the CPU backend in 16 lanes, as AVX-512 (one vector),
// AVX2 + FMA (two vectors: lanes 0-7 and 8-15) or scalar code (an array of 16), chosen once by
// CPU feature at load time. The arithmetic is written once (cpu_vec_lanes.inc, over a lane type
// whose operations are one ISA's instructions) and compiled once per ISA. The arithmetic of a
// lane is the same in every path (the same operations, explicit FMAs, no contraction: this file
// is compiled with -ffp-contract=off), and the 16 lanes are reduced in one fixed order
// ((k, k + 8), then (k, k + 4), (k, k + 2), (k, k + 1)), so every path returns the same bits
// (tests/cpu/test_cpu_fast.cpp checks it).
//
// exp: x = n ln2 + r with n = rint(x log2e) (by adding and subtracting 1.5 * 2^23) and r from a
// two-part ln2 (the product n * kLn2Hi is exact), |r| <= ln2 / 2; exp(r) by its Taylor polynomial
// of degree 7 (truncation below 1e-8 relative: 0.12 ulp) in Horner form with FMAs; 2^n built in
// the exponent field. About 1 ulp in all (measured against float64 exp by the tests).
#include "cpu_vec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DDS_CPU_VEC_X86 1
#endif

#include "rng.h"  // kBlockSize

namespace dds {
namespace cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kMagic = 12582912.f;       // 1.5 * 2^23: x + kMagic - kMagic = rint(x), |x| < 2^22
constexpr float kLn2Hi = 0.693359375f;     // 0x3f318000: 9 significant bits
constexpr float kLn2Lo = -2.12194440e-4f;  // ln2 - kLn2Hi
constexpr float kClampLo = -87.5f;         // n >= -126: 2^n is a normal float
constexpr float kClampHi = 88.f;           // n <= 127
constexpr float kMinArg = -87.33654475f;   // ln(2^-126): below it the result is flushed to 0
constexpr float kC[8] = {1.f, 1.f, 0.5f, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040};
constexpr int kLanes = 16;

// ---- lane types (cpu_vec_lanes.inc says what they provide) ----
// One float lane: exp_f32, the last columns of softmax_probs, and (16 of them) the scalar path.
struct Scalar {
  using F = float;
  using M = bool;
  static constexpr int kWidth = 1;
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static F set1(float x) { return x; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F fmadd(F a, F b, F c) { return std::fma(a, b, c); }
  static F max(F a, F b) { return a > b ? a : b; }
  static F min(F a, F b) { return a < b ? a : b; }
  static F pow2(F n) {
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float y;
    std::memcpy(&y, &bits, 4);
    return y;
  }
  static M eq(F a, F b) { return a == b; }
  static M lt(F a, F b) { return a < b; }
  static M ge(F a, F b) { return a >= b; }
  static M neq(F a, F b) { return a != b; }
  static F keep(M m, F v) { return m ? v : 0.f; }
  static F add_where(F acc, M m, F x) { return acc + (m ? x : 0.f); }
  static float reduce_add(F v) { return v; }
  static float reduce_max(F v) { return v; }
};

// A block's columns as chunks of 16: `full` chunks at base, then `tail` (the rest padded with
// -inf) when the block's length is not a multiple of 16.
struct Chunks {
  const float* base;
  int32_t full, n;
  alignas(64) float tail[kLanes];
  Chunks(const float* w, int32_t V, int32_t b) {
    const int32_t lo = b * kBlockSize, hi = std::min(V, lo + kBlockSize);
    base = w + lo;
    full = (hi - lo) / kLanes;
    const int32_t rest = (hi - lo) - full * kLanes;
    n = full + (rest ? 1 : 0);
    if (rest) {
      std::fill_n(tail, kLanes, kNegInf);
      std::memcpy(tail, base + full * kLanes, sizeof(float) * (size_t)rest);
    }
  }
  const float* at(int32_t c) const { return c < full ? base + c * kLanes : tail; }
};

inline int32_t num_blocks(int32_t V) { return (V + kBlockSize - 1) / kBlockSize; }

// ---- the paths: cpu_vec_lanes.inc compiled once per ISA ----
namespace scalar_path {
#include "cpu_vec_lanes.inc"
using Lanes = Multi<Scalar, kLanes>;
}  // namespace scalar_path

#ifdef DDS_CPU_VEC_X86

// The 8-lane tail of the reduction order, (k, k + 4), (k, k + 2), (k, k + 1), for both the
// AVX2 and the AVX-512 path (AVX: it inlines into either).
__attribute__((target("avx"))) inline float reduce_add8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// The operations that AVX2 and AVX-512 spell alike: intrinsics prefix P (_mm256, _mm512), vector
// width BITS and compare CMP (a vector of all-ones lanes in AVX2, a mask register in AVX-512).
#define DDS_X86_LANE_OPS(P, BITS, CMP)                                               \
  static F load(const float* p) { return P##_loadu_ps(p); }                          \
  static void store(float* p, F v) { P##_storeu_ps(p, v); }                          \
  static F set1(float x) { return P##_set1_ps(x); }                                  \
  static F add(F a, F b) { return P##_add_ps(a, b); }                                \
  static F sub(F a, F b) { return P##_sub_ps(a, b); }                                \
  static F mul(F a, F b) { return P##_mul_ps(a, b); }                                \
  static F fmadd(F a, F b, F c) { return P##_fmadd_ps(a, b, c); }                    \
  static F max(F a, F b) { return P##_max_ps(a, b); }                                \
  static F min(F a, F b) { return P##_min_ps(a, b); }                                \
  static F pow2(F n) {                                                               \
    return P##_castsi##BITS##_ps(                                                    \
        P##_slli_epi32(P##_add_epi32(P##_cvtps_epi32(n), P##_set1_epi32(127)), 23)); \
  }                                                                                  \
  static M eq(F a, F b) { return CMP(a, b, _CMP_EQ_OQ); }                            \
  static M lt(F a, F b) { return CMP(a, b, _CMP_LT_OQ); }                            \
  static M ge(F a, F b) { return CMP(a, b, _CMP_GE_OQ); }                            \
  static M neq(F a, F b) { return CMP(a, b, _CMP_NEQ_UQ); }

// ---- AVX2 + FMA: lanes 0-7 and 8-15 in two vectors ----
DDS_TARGET_BEGIN("avx2,fma")
namespace avx2_path {
struct Avx2x8 {
  using F = __m256;
  using M = __m256;  // all-ones lanes where true
  static constexpr int kWidth = 8;
  DDS_X86_LANE_OPS(_mm256, 256, _mm256_cmp_ps)
  static F keep(M m, F v) { return _mm256_and_ps(v, m); }
  static F add_where(F acc, M m, F x) { return _mm256_add_ps(acc, _mm256_and_ps(x, m)); }
  static float reduce_add(F v) { return reduce_add8(v); }
  static float reduce_max(F v) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    float mx = lanes[0];
    for (int k = 1; k < 8; ++k) mx = lanes[k] > mx ? lanes[k] : mx;
    return mx;
  }
};
#include "cpu_vec_lanes.inc"
using Lanes = Multi<Avx2x8, 2>;
}  // namespace avx2_path

DDS_TARGET_END

// ---- AVX-512: the 16 lanes in one vector ----
DDS_TARGET_BEGIN("avx512f")
namespace avx512_path {
struct Avx512 {
  using F = __m512;
  using M = __mmask16;
  static constexpr int kWidth = 16;
  DDS_X86_LANE_OPS(_mm512, 512, _mm512_cmp_ps_mask)
  static F keep(M m, F v) { return _mm512_maskz_mov_ps(m, v); }
  static F add_where(F acc, M m, F x) { return _mm512_mask_add_ps(acc, m, acc, x); }
  static float reduce_add(F v) {
    return reduce_add8(
        _mm256_add_ps(_mm512_castps512_ps256(v),
                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }
};
#include "cpu_vec_lanes.inc"
using Lanes = Avx512;
}  // namespace avx512_path

DDS_TARGET_END
#undef DDS_X86_LANE_OPS

VecIsa detect_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return VecIsa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VecIsa::kAvx2;
  return VecIsa::kScalar;
}
#else
VecIsa detect_isa() { return VecIsa::kScalar; }
#endif

const VecIsa g_isa = detect_isa();

bool available(VecIsa isa) { return (int)isa <= (int)g_isa; }

}  // namespace

float exp_f32(float x) { return scalar_path::exp_lanes<Scalar>(x); }

VecIsa vec_isa() { return g_isa; }

bool block_terms_isa(VecIsa isa, const float* w, int32_t V, float* m, double* s, float* e) {
  if (!available(isa)) return false;
  switch (isa) {
#ifdef DDS_CPU_VEC_X86
    case VecIsa::kAvx512:
      avx512_path::block_terms_lanes<avx512_path::Lanes>(w, V, m, s, e);
      break;
    case VecIsa::kAvx2:
      avx2_path::block_terms_lanes<avx2_path::Lanes>(w, V, m, s, e);
      break;
#endif
    default:
      scalar_path::block_terms_lanes<scalar_path::Lanes>(w, V, m, s, e);
      break;
  }
  return true;
}

bool softmax_probs_isa(VecIsa isa, const float* w, int32_t V, float M, double logS, float* out) {
  if (!available(isa)) return false;
  const float L = (float)logS, Llo = (float)(logS - (double)L);
  switch (isa) {
#ifdef DDS_CPU_VEC_X86
    case VecIsa::kAvx512:
      avx512_path::softmax_probs_lanes<avx512_path::Lanes>(w, V, M, L, Llo, out);
      break;
    case VecIsa::kAvx2:
      avx2_path::softmax_probs_lanes<avx2_path::Lanes>(w, V, M, L, Llo, out);
      break;
#endif
    default:
      scalar_path::softmax_probs_lanes<scalar_path::Lanes>(w, V, M, L, Llo, out);
      break;
  }
  return true;
}

void block_terms(const float* w, int32_t V, float* m, double* s, float* e) {
  block_terms_isa(g_isa, w, V, m, s, e);
}

void softmax_probs(const float* w, int32_t V, float M, double logS, float* out) {
  softmax_probs_isa(g_isa, w, V, M, logS, out);
}

}  // namespace cpu
}  // namespace dds
