// The per-request rules of docs/sampling.md §1, in one place for the CUDA kernels and the CPU
// backend: how a request's temperature, guidance scale, top-k, top-p and min-p are sanitised and
// flagged (the DDS_REQ_* bits of status.h), and the tempering a temperature gives. Host and device
// code; every backend computes the same values from the same inputs. The CPU backend takes its
// rules from here (src/cpu_row.h); the kernels' request loaders (sample/row.cuh load_req,
// verify.cuh request_of, shard/row.h request_params, the stash kernel's temperature check) hold
// the same expressions and move onto these functions with the next device A/B: adopting them
// compiles to other, equivalent predicate sequences (SASS not identical).
#ifndef DDS_KERNELS_COMMON_REQUEST_H_
#define DDS_KERNELS_COMMON_REQUEST_H_

#include <stdint.h>

#include "rng.h"  // DDS_HD
#include "status.h"

#if !defined(__CUDACC__)
#include <cmath>
#endif

namespace dds {
namespace rule {

DDS_HD bool is_nan(float x) {
#if defined(__CUDA_ARCH__)
  return isnan(x);
#else
  return std::isnan(x);
#endif
}
DDS_HD bool is_inf(float x) {
#if defined(__CUDA_ARCH__)
  return isinf(x);
#else
  return std::isinf(x);
#endif
}
DDS_HD bool is_finite(float x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

// A temperature that is NaN, negative or infinite is replaced by 1 and flagged.
DDS_HD bool temperature_bad(float T) { return is_nan(T) || T < 0.f || is_inf(T); }

// The tempering of a (sanitised) temperature: T = 0, or a 1/T that overflows, is greedy; else
// a = l * invT with invT = 1/T correctly rounded.
struct Tempering {
  float T;
  float invT;
  bool greedy;
};
DDS_HD Tempering temperature(float T, int32_t* status) {
  if (temperature_bad(T)) {
    T = 1.f;
    *status |= kReqBadTemperature;
  }
  Tempering t;
  t.T = T;
  t.greedy = false;
  t.invT = 1.f;
  if (T == 0.f) {
    t.greedy = true;
  } else {
#if defined(__CUDA_ARCH__)
    t.invT = __fdiv_rn(1.0f, T);
#else
    t.invT = 1.0f / T;
#endif
    if (is_inf(t.invT)) t.greedy = true;
  }
  return t;
}
// A guidance scale that is NaN or infinite: 0 (no guidance), flagged.
DDS_HD float guidance(float g, int32_t* status) {
  if (!is_finite(g)) {
    g = 0.f;
    *status |= kReqBadGuidance;
  }
  return g;
}
// A negative top-k: 0 (off), flagged.
DDS_HD int32_t top_k(int32_t k, int32_t* status) {
  if (k < 0) {
    k = 0;
    *status |= kReqBadTopK;
  }
  return k;
}
// A NaN top-p: 1 (off), flagged.
DDS_HD float top_p(float p, int32_t* status) {
  if (is_nan(p)) {
    p = 1.f;
    *status |= kReqBadTopP;
  }
  return p;
}
// A NaN or negative min-p: 0 (off), flagged; above 1: 1.
DDS_HD float min_p(float mp, int32_t* status) {
  if (is_nan(mp) || mp < 0.f) {
    mp = 0.f;
    *status |= kReqBadMinP;
  }
  if (mp > 1.f) mp = 1.f;
  return mp;
}

}  // namespace rule
}  // namespace dds

#endif  // DDS_KERNELS_COMMON_REQUEST_H_
