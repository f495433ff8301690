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

DDS_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  *lo = a * b;
#else
  const uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
#endif
}

// Philox4x32-10 (Salmon et al. 2011; Random123 / cuRAND): counter c[4], key k[2].
DDS_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                             uint32_t k1) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
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
