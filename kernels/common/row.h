// The row model of docs/sampling.md §2, host and device: how a column's logit (and, for a guided
// request, its unconditional logit) becomes l, and l the tempered a. Every kernel family (sample,
// shard, verify, stash) takes its element access and its transform from here; the request rules
// that give g, 1/T and greedy live in request.h, the status bits in status.h.
//
//   element   Elt<DT> (the storage type, the 16-byte vector width and the conversion of dtype DT:
//             0 f32, 1 bf16, 2 f16), load_elt / store_elt (the dtype known at run time)
//   §2 l      guide (fmaf guidance, -inf where c or u is), sanitize (NaN -> -inf, +inf -> FLT_MAX),
//             Ban (the columns set to -inf: the banned token), make_l (all three, in that order)
//   §3 a      temper (a = l * 1/T; +inf -> FLT_MAX, a finite l overflowing to -inf -> -FLT_MAX)
//
// The allowed-token mask (a request's row of allowed.h bits) is a field of Ban and one more clause
// of Ban::excluded; make_l and everything built on it apply it. The whole-block fast paths of the
// sample kernels (kernels/sample/row.cuh ban_block and its callers) patch the single banned column
// of a block, and test every column against the mask words only when the row has a mask.
//
// The CPU backend (src/cpu_row.h) keeps vectorisable twins of sanitize / temper (compare-and-
// select forms that GCC turns into SIMD blends); they compute the same values for every input.
#ifndef DDS_KERNELS_COMMON_ROW_H_
#define DDS_KERNELS_COMMON_ROW_H_

#include <float.h>
#include <stdint.h>

#include "allowed.h"
#include "dtype.h"
#include "rng.h"  // DDS_HD

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#else
#include <math.h>

#include <cmath>
#endif

namespace dds {

// ------------------------------------------------------------------------------------------------
// Correctly rounded fp32 steps (no contraction into fma on the device) and the infinities.
DDS_HD float neg_inf() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0xff800000);
#else
  return bits_to_f32(0xff800000u);
#endif
}
DDS_HD float fmul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DDS_HD float fsub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
DDS_HD float ffma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// ------------------------------------------------------------------------------------------------
// Element access.
template <int DT>
struct Elt;
template <>
struct Elt<kDtypeF32> {
  using T = float;
  static constexpr int VEC = 4;  // elements per 16-byte load
  static DDS_HD float cvt(float x) { return x; }
};
struct Elt16 {  // the 16-bit formats: raw bits, 8 to a 16-byte load
  using T = uint16_t;
  static constexpr int VEC = 8;
};
template <>
struct Elt<kDtypeBF16> : Elt16 {
  static DDS_HD float cvt(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float((uint32_t)h << 16);
#else
    return bf16_to_f32(h);
#endif
  }
};
template <>
struct Elt<kDtypeF16> : Elt16 {
  static DDS_HD float cvt(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return f16_to_f32(h);
#endif
  }
};

// Element idx of a tensor whose dtype is known only at run time.
DDS_HD float load_elt(const void* base, int32_t dtype, int64_t idx) {
  switch (dtype) {
    case kDtypeF32: return static_cast<const float*>(base)[idx];
    case kDtypeBF16: return Elt<kDtypeBF16>::cvt(static_cast<const uint16_t*>(base)[idx]);
    default: return Elt<kDtypeF16>::cvt(static_cast<const uint16_t*>(base)[idx]);
  }
}

// Stores v as element idx of a tensor of run-time dtype (round to nearest even).
DDS_HD void store_elt(void* base, int32_t dtype, int64_t idx, float v) {
  switch (dtype) {
    case kDtypeF32: static_cast<float*>(base)[idx] = v; break;
    case kDtypeBF16: static_cast<uint16_t*>(base)[idx] = f32_to_bf16(v); break;
    default: static_cast<uint16_t*>(base)[idx] = f32_to_f16(v); break;
  }
}

namespace row {

// ------------------------------------------------------------------------------------------------
// §2: l from c (and u).

// Guidance: l = fmaf(g, c - u, c), -inf where c or u is -inf (not NaN from inf - inf).
DDS_HD float guide(float c, float u, float g) {
  return (c == neg_inf() || u == neg_inf()) ? neg_inf() : ffma_rn(g, fsub_rn(c, u), c);
}
// NaN -> -inf, +inf -> FLT_MAX: two min / max (the max of NaN and -inf is -inf).
DDS_HD float sanitize(float v) { return fminf(fmaxf(v, neg_inf()), FLT_MAX); }

// The columns §2 sets to -inf whatever their logits: the banned token (-1: none) and the columns
// that the request's allowed-token mask row (allowed.h; null: every column allowed) leaves out.
// A kernel reads the mask once per group of columns: word(c0, V) is the mask word of column c0
// shifted so that bit e stands for column c0 + e (all ones without a mask, or from c0 >= V on:
// those columns are -inf anyway and the mask row has no word there); group(c0, V) is the group's
// excluded columns as bits (bit e: column c0 + e is the banned token or masked out; make_l's group
// form tests one bit per column), for e < 32 - (c0 & 31). excluded(col) reads
// the word itself (col < V).
struct Ban {
  int32_t token;
  const int32_t* mask;
  DDS_HD uint32_t word(int32_t c0, int32_t V) const {
    return (mask && c0 < V) ? (uint32_t)mask[c0 >> 5] >> (c0 & 31) : ~0u;
  }
  DDS_HD uint32_t group(int32_t c0, int32_t V) const {
    const uint32_t d = (uint32_t)(token - c0);  // (token >= -1, c0 >= 0: no overflow)
    return ~word(c0, V) | (d < 32u ? 1u << d : 0u);
  }
  DDS_HD bool excluded(int32_t col) const { return col == token || !allowed(mask, col); }
};

// l of column `col`: guidance (guided requests), the excluded columns, then sanitize.
DDS_HD float make_l(float c, float u, bool guided, float g, int32_t col, const Ban& ban) {
  float v = guided ? guide(c, u, g) : c;
  if (ban.excluded(col)) v = neg_inf();
  return sanitize(v);
}
// The same for column c0 + e of a group whose excluded columns are x = ban.group(c0, V) (one read
// of the mask per group of columns).
DDS_HD float make_l(float c, float u, bool guided, float g, uint32_t x, int32_t e) {
  float v = guided ? guide(c, u, g) : c;
  if ((x >> e) & 1u) v = neg_inf();
  return sanitize(v);
}

// ------------------------------------------------------------------------------------------------
// The order of every selection, value descending, ties by id: order_key(a) is order-preserving
// (larger a, larger key) with -0 and +0 one value (+0's key), so that the two zeros tie and their
// ids decide, as the values compare; key_value(k) is its inverse (+0 for the zeros). The sampling
// kernels' radix selects (fkey), the shard kernels, draft verification, the stash and the CPU
// backend's sort keys all derive their keys from it.
DDS_HD uint32_t order_key(float a) {
  uint32_t b = f32_to_bits(a);
  if (b == 0x80000000u) b = 0u;  // -0 -> +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
DDS_HD float key_value(uint32_t k) { return bits_to_f32((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// ------------------------------------------------------------------------------------------------
// §3 temperature: a = l * invT (invT from rule::temperature); +inf -> FLT_MAX, and a finite l whose
// product overflows to -inf stays in K0 as -FLT_MAX. l is a make_l value (never NaN or +inf).
DDS_HD float temper(float l, float invT) {
  float a = fminf(fmul_rn(l, invT), FLT_MAX);
  if (a == neg_inf() && l != neg_inf()) a = -FLT_MAX;
  return a;
}

}  // namespace row
}  // namespace dds

#endif  // DDS_KERNELS_COMMON_ROW_H_
