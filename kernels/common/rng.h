// dds random numbers: Philox4x32-10 and the 64-bit -> Gumbel conversion in float64.
// Framework-free, header-only, usable from host C++ and from CUDA device code. This file IS the
// spec of docs/sampling.md §RNG: both backends (and any other implementation) must agree with it
// bit for bit.
#ifndef DDS_KERNELS_RNG_H_
#define DDS_KERNELS_RNG_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define DDS_HD __host__ __device__ __forceinline__
#else
#define DDS_HD inline
#endif

#if !defined(__CUDACC__)
#include <cmath>
#endif

namespace dds {

// Size of the blocks of consecutive token ids of the two-level sampler.
constexpr int kBlockSize = 1024;

// Purpose salts: counter word 3. Distinct purposes never share a random number.
constexpr uint32_t kSaltBlock = 0x424C4B31u;   // "BLK1": one Gumbel per 1024-token block
constexpr uint32_t kSaltToken = 0x544F4B31u;   // "TOK1": one Gumbel per token of the winning block
constexpr uint32_t kSaltReveal = 0x52564C31u;  // "RVL1": reveal policies (random order, noise)
constexpr uint32_t kSaltVerify = 0x56524631u;  // "VRF1": speculative verification uniforms

struct Philox4 {
  uint32_t x[4];
};

// Philox4x32's multipliers and Weyl key increments.
constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// (hi, lo) of a * b from one 64-bit product (one wide multiply on the GPU: IdDraws).
DDS_HD void mulhilo_wide(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}
// (hi, lo) of a * b; on the GPU as __umulhi and a low multiply (philox4x32_10's form: the
// kernels' code is tuned with it).
DDS_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  *lo = a * b;
#else
  mulhilo_wide(a, b, hi, lo);
#endif
}

// Philox4x32-10 (Salmon et al. 2011; Random123 / cuRAND): counter c[4], key k[2].
DDS_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                             uint32_t k1) {
  const uint32_t M0 = kPhiloxM0, M1 = kPhiloxM1, W0 = kPhiloxW0, W1 = kPhiloxW1;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += W0;
      k1 += W1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(M0, c0, &hi0, &lo0);
    philox_mulhilo(M1, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  Philox4 out;
  out.x[0] = c0;
  out.x[1] = c1;
  out.x[2] = c2;
  out.x[3] = c3;
  return out;
}

// The 64 random bits of (seed, step, position, id, salt):
// key = (seed low 32, seed high 32), counter = (id, position, step, salt), bits = x0 | x1 << 32.
DDS_HD uint64_t random_bits(uint64_t seed, uint32_t step, uint32_t position, uint32_t id,
                            uint32_t salt) {
  const Philox4 r =
      philox4x32_10(id, position, step, salt, (uint32_t)seed, (uint32_t)(seed >> 32));
  return (uint64_t)r.x[0] | ((uint64_t)r.x[1] << 32);
}

// random_bits of one (seed, step, position, salt) for many ids: a row's token or block draws.
// Only the counter's first word varies with the id, so the round keys, the first round's
// multiply of the step and everything that follows from it are computed once; bits(id) does the
// id-dependent rest, 17 multiplies and 18 xors, and returns random_bits(seed, step, position,
// id, salt) bit for bit (tests/cpu/test_rng.cpp).
//   round 0: c = (id, pos, step, salt); M1 * step is fixed, so c0' = hi(M1 step) ^ pos ^ K0[0]
//            and c1' = lo(M1 step) are too; c2' = hi(M0 id) ^ salt ^ K1[0], c3' = lo(M0 id);
//   round 1: M0 * c0' is fixed: c0'' = hi(M1 c2') ^ c1' ^ K0[1], c2'' = hi(M0 c0') ^ c3' ^ K1[1],
//            c3'' = lo(M0 c0');
//   round 2: c2''' = hi(M0 c0'') ^ c3'' ^ K1[2]; rounds 2-9 otherwise as philox4x32_10.
struct IdDraws {
  uint32_t r0, r1a, r1b, r2;  // the fixed xor terms of rounds 0-2 (above)
  uint32_t k0[8];             // K0[2..9]
  uint32_t k1[6];             // K1[3..8] (round 9's third word is not returned)

  DDS_HD IdDraws(uint64_t seed, uint32_t step, uint32_t position, uint32_t salt) {
    const uint32_t M0 = kPhiloxM0, M1 = kPhiloxM1, W0 = kPhiloxW0, W1 = kPhiloxW1;
    const uint32_t s0 = (uint32_t)seed, s1 = (uint32_t)(seed >> 32);
    uint32_t ah, al, bh, bl;
    philox_mulhilo(M1, step, &ah, &al);
    const uint32_t c0 = ah ^ position ^ s0;  // round 0's first word
    philox_mulhilo(M0, c0, &bh, &bl);
    r0 = salt ^ s1;
    r1a = al ^ (s0 + W0);
    r1b = bh ^ (s1 + W1);
    r2 = bl ^ (s1 + 2u * W1);
    for (int r = 2; r < 10; ++r) k0[r - 2] = s0 + (uint32_t)r * W0;
    for (int r = 3; r < 9; ++r) k1[r - 3] = s1 + (uint32_t)r * W1;
  }

  DDS_HD uint64_t bits(uint32_t id) const {
    const uint32_t M0 = kPhiloxM0, M1 = kPhiloxM1;
    constexpr auto mulhilo = mulhilo_wide;
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(M0, id, &hi0, &lo0);  // round 0
    uint32_t c2 = hi0 ^ r0;
    const uint32_t c3a = lo0;
    mulhilo(M1, c2, &hi1, &lo1);  // round 1
    uint32_t c0 = hi1 ^ r1a, c1 = lo1;
    c2 = c3a ^ r1b;
    mulhilo(M0, c0, &hi0, &lo0);  // round 2
    mulhilo(M1, c2, &hi1, &lo1);
    c0 = hi1 ^ c1 ^ k0[0];
    c1 = lo1;
    c2 = hi0 ^ r2;
    uint32_t c3 = lo0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int r = 3; r < 9; ++r) {
      mulhilo(M0, c0, &hi0, &lo0);
      mulhilo(M1, c2, &hi1, &lo1);
      c0 = hi1 ^ c1 ^ k0[r - 2];
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1[r - 3];
      c3 = lo0;
    }
    mulhilo(M1, c2, &hi1, &lo1);  // round 9: the first two words only
    return (uint64_t)(hi1 ^ c1 ^ k0[7]) | ((uint64_t)lo1 << 32);
  }
};

// Uniform in the open interval (0, 1), exact in float64: odd multiples of 2^-53.
DDS_HD double bits_to_uniform(uint64_t bits) {
  return (double)((bits >> 11) | 1ull) * 0x1p-53;
}

// Standard Gumbel from 64 bits: u = bits_to_uniform, E = -log1p(-u) (an Exp(1)), G = -log(E).
// Range about [-3.6, 36.7]; the upper tail (what lets rare tokens win) resolved to 2^-53.
DDS_HD double bits_to_gumbel(uint64_t bits) {
  const double u = bits_to_uniform(bits);
#if defined(__CUDA_ARCH__)
  const double e = -log1p(-u);
  return -log(e);
#else
  const double e = -std::log1p(-u);
  return -std::log(e);
#endif
}

DDS_HD double gumbel(uint64_t seed, uint32_t step, uint32_t position, uint32_t id,
                     uint32_t salt) {
  return bits_to_gumbel(random_bits(seed, step, position, id, salt));
}

}  // namespace dds

#endif  // DDS_KERNELS_RNG_H_
