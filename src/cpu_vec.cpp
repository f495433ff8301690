// cpu_vec.h: the per-column float work of the CPU backend in 16 lanes, as AVX-512 (one vector),
// AVX2 + FMA (two vectors: lanes 0-7 and 8-15) or scalar code (an array of 16), chosen once by
// CPU feature at load time. The arithmetic of a lane is the same in every path (the same
// operations, explicit FMAs, no contraction: this file is compiled with -ffp-contract=off), and
// the 16 lanes are reduced in one fixed order ((k, k + 8), then (k, k + 4), (k, k + 2), (k, k + 1)),
// so every path returns the same bits (tests/cpu/test_cpu_fast.cpp checks it).
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
constexpr float kMagic = 12582912.f;          // 1.5 * 2^23: x + kMagic - kMagic = rint(x), |x| < 2^22
constexpr float kLn2Hi = 0.693359375f;        // 0x3f318000: 9 significant bits
constexpr float kLn2Lo = -2.12194440e-4f;     // ln2 - kLn2Hi
constexpr float kClampLo = -87.5f;            // n >= -126: 2^n is a normal float
constexpr float kClampHi = 88.f;              // n <= 127
constexpr float kMinArg = -87.33654475f;      // ln(2^-126): below it the result is flushed to 0
constexpr float kC[8] = {1.f, 1.f, 0.5f, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040};
constexpr int kLanes = 16;

// ---- scalar lanes ----
inline float exp_lane(float x) {
  float xc = x > kClampLo ? x : kClampLo;
  xc = xc < kClampHi ? xc : kClampHi;
  const float t = xc * kLog2e;
  const float n = (t + kMagic) - kMagic;
  float r = std::fma(n, -kLn2Hi, xc);
  r = std::fma(n, -kLn2Lo, r);
  float p = kC[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, kC[k]);
  const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  const float y = p * scale;
  return x >= kMinArg ? y : 0.f;
}

// The fixed reduction order of 16 lanes.
inline float reduce_add16(const float* v) {
  float a[8], b[4], c[2];
  for (int k = 0; k < 8; ++k) a[k] = v[k] + v[k + 8];
  for (int k = 0; k < 4; ++k) b[k] = a[k] + a[k + 4];
  for (int k = 0; k < 2; ++k) c[k] = b[k] + b[k + 2];
  return c[0] + c[1];
}

// One block's terms from its kept values in chunks of 16 (the caller pads the tail with -inf).
template <class Chunk>
void block_terms_scalar_chunks(int32_t nchunks, Chunk chunk, float* m_out, double* s_out,
                               float* e_out) {
  float mx = kNegInf;
  for (int32_t c = 0; c < nchunks; ++c) {
    const float* v = chunk(c);
    for (int k = 0; k < kLanes; ++k) mx = v[k] > mx ? v[k] : mx;
  }
  *m_out = mx;
  if (!(mx > kNegInf)) {
    *s_out = 0;
    if (e_out) *e_out = 0.f;
    return;
  }
  float n[kLanes] = {}, r[kLanes] = {}, e[kLanes] = {};
  for (int32_t c = 0; c < nchunks; ++c) {
    const float* v = chunk(c);
    for (int k = 0; k < kLanes; ++k) {
      const float d = v[k] - mx;
      const float x = exp_lane(d);
      n[k] += d == 0.f ? 1.f : 0.f;
      r[k] += d < 0.f ? x : 0.f;
      if (e_out) e[k] = std::fma(x, d > kClampLo ? d : kClampLo, e[k]);
    }
  }
  *s_out = (double)reduce_add16(n) + (double)reduce_add16(r);
  if (e_out) *e_out = reduce_add16(e);
}

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

void block_terms_scalar(const float* w, int32_t V, float* m, double* s, float* e) {
  for (int32_t b = 0; b < num_blocks(V); ++b) {
    const Chunks ch(w, V, b);
    block_terms_scalar_chunks(ch.n, [&](int32_t c) { return ch.at(c); }, m + b, s + b,
                              e ? e + b : nullptr);
  }
}

// exp(((w - M) - L) - Llo) as exp(s) (1 + lo): s = (w - M) - L in fp32 and lo its rounding
// errors (two TwoSums) minus Llo, so that the argument's rounding (|s| 2^-24 relative) does not
// reach the probability; 0 where exp(s) is (w = -inf included).
inline float prob_lane(float w, float M, float L, float Llo) {
  const float s1 = w - M, b1 = s1 - w, e1 = (w - (s1 - b1)) + (-M - b1);
  const float s2 = s1 - L, b2 = s2 - s1, e2 = (s1 - (s2 - b2)) + (-L - b2);
  const float x = exp_lane(s2);
  return x != 0.f ? std::fma(x, (e1 + e2) - Llo, x) : 0.f;
}

void softmax_probs_scalar(const float* w, int32_t V, float M, float L, float Llo, float* out) {
  for (int32_t t = 0; t < V; ++t) out[t] = prob_lane(w[t], M, L, Llo);
}

#ifdef DDS_CPU_VEC_X86
// ---- AVX2 + FMA: lanes 0-7 and 8-15 in two vectors ----
#define DDS_AVX2 __attribute__((target("avx2,fma")))
DDS_AVX2 inline __m256 exp_avx2(__m256 x) {
  __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(kClampLo));
  xc = _mm256_min_ps(xc, _mm256_set1_ps(kClampHi));
  const __m256 t = _mm256_mul_ps(xc, _mm256_set1_ps(kLog2e));
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(t, _mm256_set1_ps(kMagic)), _mm256_set1_ps(kMagic));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kC[7]);
  for (int k = 6; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[k]));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  return _mm256_and_ps(y, _mm256_cmp_ps(x, _mm256_set1_ps(kMinArg), _CMP_GE_OQ));
}

// (lanes 0-7) + (lanes 8-15), then the 8 lanes in the order of reduce_add16.
DDS_AVX2 inline float reduce_add_avx2(__m256 a, __m256 b) {
  const __m256 s8 = _mm256_add_ps(a, b);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

DDS_AVX2 void block_terms_avx2(const float* w, int32_t V, float* m, double* s, float* e) {
  for (int32_t b = 0; b < num_blocks(V); ++b) {
    const Chunks ch(w, V, b);
    const int32_t nc = ch.n;
    auto at = [&ch](int32_t c) { return ch.at(c); };
    __m256 mx0 = _mm256_set1_ps(kNegInf), mx1 = mx0;
    for (int32_t c = 0; c < nc; ++c) {
      mx0 = _mm256_max_ps(mx0, _mm256_loadu_ps(at(c)));
      mx1 = _mm256_max_ps(mx1, _mm256_loadu_ps(at(c) + 8));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_max_ps(mx0, mx1));
    float mxs = kNegInf;
    for (float v : lanes) mxs = v > mxs ? v : mxs;
    m[b] = mxs;
    if (!(mxs > kNegInf)) {
      s[b] = 0;
      if (e) e[b] = 0.f;
      continue;
    }
    const __m256 mv = _mm256_set1_ps(mxs), lo = _mm256_set1_ps(kClampLo);
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
    __m256 n0 = zero, n1 = zero, r0 = zero, r1 = zero, e0 = zero, e1 = zero;
    // n: the columns at the maximum (terms of exactly 1), r: the others' terms.
#define DDS_TERMS_AVX2(D, X, N, R)                                                   \
  N = _mm256_add_ps(N, _mm256_and_ps(one, _mm256_cmp_ps(D, zero, _CMP_EQ_OQ)));     \
  R = _mm256_add_ps(R, _mm256_and_ps(X, _mm256_cmp_ps(D, zero, _CMP_LT_OQ)))
    if (e) {
      for (int32_t c = 0; c < nc; ++c) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(at(c)), mv);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(at(c) + 8), mv);
        const __m256 x0 = exp_avx2(d0), x1 = exp_avx2(d1);
        DDS_TERMS_AVX2(d0, x0, n0, r0);
        DDS_TERMS_AVX2(d1, x1, n1, r1);
        e0 = _mm256_fmadd_ps(x0, _mm256_max_ps(d0, lo), e0);
        e1 = _mm256_fmadd_ps(x1, _mm256_max_ps(d1, lo), e1);
      }
      e[b] = reduce_add_avx2(e0, e1);
    } else {
      for (int32_t c = 0; c < nc; ++c) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(at(c)), mv);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(at(c) + 8), mv);
        const __m256 x0 = exp_avx2(d0), x1 = exp_avx2(d1);
        DDS_TERMS_AVX2(d0, x0, n0, r0);
        DDS_TERMS_AVX2(d1, x1, n1, r1);
      }
    }
#undef DDS_TERMS_AVX2
    s[b] = (double)reduce_add_avx2(n0, n1) + (double)reduce_add_avx2(r0, r1);
  }
}

DDS_AVX2 void softmax_probs_avx2(const float* w, int32_t V, float M, float L, float Llo, float* out) {
  const __m256 mv = _mm256_set1_ps(M), nm = _mm256_set1_ps(-M), lv = _mm256_set1_ps(L),
               nl = _mm256_set1_ps(-L), llo = _mm256_set1_ps(Llo), zero = _mm256_setzero_ps();
  int32_t t = 0;
  for (; t + 8 <= V; t += 8) {
    const __m256 wv = _mm256_loadu_ps(w + t);
    const __m256 s1 = _mm256_sub_ps(wv, mv), b1 = _mm256_sub_ps(s1, wv);
    const __m256 e1 = _mm256_add_ps(_mm256_sub_ps(wv, _mm256_sub_ps(s1, b1)), _mm256_sub_ps(nm, b1));
    const __m256 s2 = _mm256_sub_ps(s1, lv), b2 = _mm256_sub_ps(s2, s1);
    const __m256 e2 = _mm256_add_ps(_mm256_sub_ps(s1, _mm256_sub_ps(s2, b2)), _mm256_sub_ps(nl, b2));
    const __m256 x = exp_avx2(s2);
    const __m256 p = _mm256_fmadd_ps(x, _mm256_sub_ps(_mm256_add_ps(e1, e2), llo), x);
    _mm256_storeu_ps(out + t, _mm256_and_ps(p, _mm256_cmp_ps(x, zero, _CMP_NEQ_UQ)));
  }
  for (; t < V; ++t) out[t] = prob_lane(w[t], M, L, Llo);
}
#undef DDS_AVX2

// ---- AVX-512: the 16 lanes in one vector ----
#define DDS_AVX512 __attribute__((target("avx512f")))
DDS_AVX512 inline __m512 exp_avx512(__m512 x) {
  __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(kClampLo));
  xc = _mm512_min_ps(xc, _mm512_set1_ps(kClampHi));
  const __m512 t = _mm512_mul_ps(xc, _mm512_set1_ps(kLog2e));
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(t, _mm512_set1_ps(kMagic)), _mm512_set1_ps(kMagic));
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kC[7]);
  for (int k = 6; k >= 0; --k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC[k]));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kMinArg), _CMP_GE_OQ);
  return _mm512_maskz_mov_ps(keep, y);
}

DDS_AVX512 inline float reduce_add_avx512(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

DDS_AVX512 void block_terms_avx512(const float* w, int32_t V, float* m, double* s, float* e) {
  for (int32_t b = 0; b < num_blocks(V); ++b) {
    const Chunks ch(w, V, b);
    const int32_t nc = ch.n;
    auto at = [&ch](int32_t c) { return ch.at(c); };
    __m512 mx = _mm512_set1_ps(kNegInf);
    for (int32_t c = 0; c < nc; ++c) mx = _mm512_max_ps(mx, _mm512_loadu_ps(at(c)));
    const float mxs = _mm512_reduce_max_ps(mx);
    m[b] = mxs;
    if (!(mxs > kNegInf)) {
      s[b] = 0;
      if (e) e[b] = 0.f;
      continue;
    }
    const __m512 mv = _mm512_set1_ps(mxs), lo = _mm512_set1_ps(kClampLo);
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.f);
    __m512 nv = zero, rv = zero, ev = zero;
    // n: the columns at the maximum (terms of exactly 1), r: the others' terms.
    for (int32_t c = 0; c < nc; ++c) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(at(c)), mv);
      const __m512 x = exp_avx512(d);
      nv = _mm512_mask_add_ps(nv, _mm512_cmp_ps_mask(d, zero, _CMP_EQ_OQ), nv, one);
      rv = _mm512_mask_add_ps(rv, _mm512_cmp_ps_mask(d, zero, _CMP_LT_OQ), rv, x);
      if (e) ev = _mm512_fmadd_ps(x, _mm512_max_ps(d, lo), ev);
    }
    if (e) e[b] = reduce_add_avx512(ev);
    s[b] = (double)reduce_add_avx512(nv) + (double)reduce_add_avx512(rv);
  }
}

DDS_AVX512 void softmax_probs_avx512(const float* w, int32_t V, float M, float L, float Llo,
                                     float* out) {
  const __m512 mv = _mm512_set1_ps(M), nm = _mm512_set1_ps(-M), lv = _mm512_set1_ps(L),
               nl = _mm512_set1_ps(-L), llo = _mm512_set1_ps(Llo), zero = _mm512_setzero_ps();
  int32_t t = 0;
  for (; t + 16 <= V; t += 16) {
    const __m512 wv = _mm512_loadu_ps(w + t);
    const __m512 s1 = _mm512_sub_ps(wv, mv), b1 = _mm512_sub_ps(s1, wv);
    const __m512 e1 = _mm512_add_ps(_mm512_sub_ps(wv, _mm512_sub_ps(s1, b1)), _mm512_sub_ps(nm, b1));
    const __m512 s2 = _mm512_sub_ps(s1, lv), b2 = _mm512_sub_ps(s2, s1);
    const __m512 e2 = _mm512_add_ps(_mm512_sub_ps(s1, _mm512_sub_ps(s2, b2)), _mm512_sub_ps(nl, b2));
    const __m512 x = exp_avx512(s2);
    const __m512 p = _mm512_fmadd_ps(x, _mm512_sub_ps(_mm512_add_ps(e1, e2), llo), x);
    _mm512_storeu_ps(out + t, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, zero, _CMP_NEQ_UQ), p));
  }
  for (; t < V; ++t) out[t] = prob_lane(w[t], M, L, Llo);
}
#undef DDS_AVX512

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

float exp_f32(float x) { return exp_lane(x); }

VecIsa vec_isa() { return g_isa; }

bool block_terms_isa(VecIsa isa, const float* w, int32_t V, float* m, double* s, float* e) {
  if (!available(isa)) return false;
  switch (isa) {
#ifdef DDS_CPU_VEC_X86
    case VecIsa::kAvx512: block_terms_avx512(w, V, m, s, e); break;
    case VecIsa::kAvx2: block_terms_avx2(w, V, m, s, e); break;
#endif
    default: block_terms_scalar(w, V, m, s, e); break;
  }
  return true;
}

bool softmax_probs_isa(VecIsa isa, const float* w, int32_t V, float M, double logS, float* out) {
  if (!available(isa)) return false;
  const float L = (float)logS, Llo = (float)(logS - (double)L);
  switch (isa) {
#ifdef DDS_CPU_VEC_X86
    case VecIsa::kAvx512: softmax_probs_avx512(w, V, M, L, Llo, out); break;
    case VecIsa::kAvx2: softmax_probs_avx2(w, V, M, L, Llo, out); break;
#endif
    default: softmax_probs_scalar(w, V, M, L, Llo, out); break;
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
