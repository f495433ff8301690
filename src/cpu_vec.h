// The CPU backend's per-column float work in vector lanes (docs/cpu_backend.md): a float exp
// (own polynomial, about 1 ulp) and, per 1024-column block, the maximum, the sum of exp and the
// entropy term; and the probabilities of a row. AVX-512, AVX2 + FMA, or a scalar baseline, chosen
// once by CPU feature at load time. Every path computes the same bits: 16 lanes of the same
// arithmetic in every path (lane k takes the block's columns k, k + 16, ...; the tail padded with
// -inf, whose terms are exact zeros), the same FMAs, and one fixed order of the lanes' reduction.
#ifndef DDS_SRC_CPU_VEC_H_
#define DDS_SRC_CPU_VEC_H_

#include <cstdint>

namespace dds {
namespace cpu {

// exp(x) in float, within about 1 ulp for x in [-87.3, 88.7]; 0 below ln(2^-126) (results that
// would be subnormal are flushed to zero), and for x = -inf. The scalar form of the lanes'
// arithmetic (tests compare it with float64 exp).
float exp_f32(float x);

// For each block b of kBlockSize columns of w[0, V) (w > -inf are the kept columns; no NaN):
// m[b] = the block's maximum (-inf when no column is kept), s[b] = sum over the kept columns of
// exp(w - m[b]) (>= 1 when m[b] > -inf), and, when e is not null, e[b] = sum of
// exp(w - m[b]) * (w - m[b]) (the entropy term). fp32 lanes; s[b] is the count of columns at the
// maximum (terms of exactly 1) plus the fp32 sum of the other terms, added in float64, so that a
// peaked block's s - 1 (what log-probs near 0 depend on) keeps its relative accuracy.
void block_terms(const float* w, int32_t V, float* m, double* s, float* e);

// out[t] = exp((w[t] - M) - logS) in fp32 (0 where w[t] = -inf): the probabilities of
// softmax(w) with M its maximum and logS = log of its normaliser relative to M. The argument's
// fp32 rounding errors are carried as a first-order correction (within ~1e-7 relative).
void softmax_probs(const float* w, int32_t V, float M, double logS, float* out);

// Which lane implementation the calls above use (tests: every available one gives the same bits).
enum class VecIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
VecIsa vec_isa();
// The implementations one by one (false when the CPU lacks the ISA): for the tests.
bool block_terms_isa(VecIsa isa, const float* w, int32_t V, float* m, double* s, float* e);
bool softmax_probs_isa(VecIsa isa, const float* w, int32_t V, float M, double logS, float* out);

}  // namespace cpu
}  // namespace dds

// Lane code compiled once per ISA (cpu_vec.cpp, cpu_rng_batch.cpp): every function declared
// between DDS_TARGET_BEGIN("isa") and DDS_TARGET_END, templates and their instantiations
// included, is compiled for that ISA, so a path's functions inline into one another and pass
// vectors between them at every optimisation level.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DDS_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define DDS_TARGET_BEGIN(isa) \
  DDS_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define DDS_TARGET_END DDS_PRAGMA(clang attribute pop)
#else
#define DDS_TARGET_BEGIN(isa) DDS_PRAGMA(GCC push_options) DDS_PRAGMA(GCC target(isa))
#define DDS_TARGET_END DDS_PRAGMA(GCC pop_options)
#endif
#endif

#endif  // DDS_SRC_CPU_VEC_H_
