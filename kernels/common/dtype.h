// The dtype codes of the logits / probs tensors (the values of the public dds_dtype), the one
// dtype dispatch of every launcher (DDS_DISPATCH_DTYPE), and bit-exact conversions between fp32
// and the 16-bit dtypes, usable on host and device (the CUDA kernels may use the hardware
// intrinsics instead: they round the same way).
#ifndef DDS_KERNELS_DTYPE_H_
#define DDS_KERNELS_DTYPE_H_

#include <stdint.h>
#include <string.h>

#include "rng.h"  // DDS_HD

namespace dds {

constexpr int32_t kDtypeF32 = 0, kDtypeBF16 = 1, kDtypeF16 = 2;  // DDS_DTYPE_*

// Runs the statements that follow (a braced block) with `constexpr int DT` set to the run-time
// dtype `dtype` (FlashInfer's DISPATCH_* style): kDtypeF32, kDtypeBF16, and kDtypeF16 for any
// other value (the C ABI layer has refused those). Every launcher dispatches its dtype here:
//   DDS_DISPATCH_DTYPE(P.dtype, DT, { return launch_dt<DT>(P, s); });
#define DDS_DISPATCH_DTYPE(dtype, DT, ...)      \
  switch (dtype) {                              \
    case ::dds::kDtypeF32: {                    \
      constexpr int DT = ::dds::kDtypeF32;      \
      __VA_ARGS__                               \
    } break;                                    \
    case ::dds::kDtypeBF16: {                   \
      constexpr int DT = ::dds::kDtypeBF16;     \
      __VA_ARGS__                               \
    } break;                                    \
    default: {                                  \
      constexpr int DT = ::dds::kDtypeF16;      \
      __VA_ARGS__                               \
    } break;                                    \
  }

DDS_HD float bits_to_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}
DDS_HD uint32_t f32_to_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}

DDS_HD float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

// Round to nearest even; NaN stays NaN (quiet).
DDS_HD uint16_t f32_to_bf16(float f) {
  const uint32_t b = f32_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
  const uint32_t r = b + 0x7fffu + ((b >> 16) & 1u);
  return (uint16_t)(r >> 16);
}

DDS_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    if (man == 0) return bits_to_f32(sign);
    // subnormal: value = man * 2^-24
    float v = (float)man * 5.9604644775390625e-8f;
    return (sign ? -v : v);
  }
  return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

// Round to nearest even, overflow to inf, NaN stays NaN.
DDS_HD uint16_t f32_to_f16(float f) {
  const uint32_t b = f32_to_bits(f);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const uint32_t absb = b & 0x7fffffffu;
  if (absb > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (absb >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (absb < 0x38800000u) {                                     // below 2^-14: subnormal or 0
    if (absb < 0x33000000u) return (uint16_t)sign;              // < 2^-25: rounds to 0
    const uint32_t e = absb >> 23;
    const uint32_t m = (absb & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24 -> value = m * 2^(e-150), target units 2^-24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
  }
  uint32_t r = absb - 0x38000000u;  // rebias exponent 127 -> 15 (in the 23-bit field)
  r = r + 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(sign | (r >> 13));
}

}  // namespace dds

#endif  // DDS_KERNELS_DTYPE_H_
