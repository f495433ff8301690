// The per-request rules of docs/sampling.md §1, in one place for the CUDA kernels and the CPU
// backend: how a request's temperature, guidance scale (and its unconditional rows), top-k, top-p
// and min-p are sanitised and flagged (the DDS_REQ_* bits of status.h), and the tempering a
// temperature gives; and the one loading of a request's values under those rules (sampling,
// uncond_rows). Host and device code; every backend computes the same values from the same
// inputs: the CPU backend (src/cpu_row.h request_params), the sample kernels (sample/row.cuh
// load_req), verify (verify.cuh request_of), the shard kernels (shard/row.h request_params) and
// the stash kernel (its temperature check and tempering).
#ifndef DDS_KERNELS_COMMON_REQUEST_H_
#define DDS_KERNELS_COMMON_REQUEST_H_

#include <stdint.h>

#include "rng.h"  // DDS_HD
#include "status.h"

#include <cmath>

namespace dds {
namespace rule {

// (std::isnan / isinf / isfinite: the standard library's on the host, CUDA's in device code)
DDS_HD bool is_nan(float x) { return std::isnan(x); }
DDS_HD bool is_inf(float x) { return std::isinf(x); }
DDS_HD bool is_finite(float x) { return std::isfinite(x); }

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
// Whether a request of `rows` rows with (sanitised) guidance scale g is guided, and from which
// unconditional row (*first): only with an unconditional tensor (has_uncond) and g != 0. Its
// unconditional rows start at `first` (the request's first row when the call gives no
// uncond_row_offsets: listed = false); a listed negative first means "unguided" (not flagged);
// rows outside [0, uncond_num_rows), or a request whose own row range is inconsistent (!rows_ok),
// are unguided and flagged.
DDS_HD bool guided(bool has_uncond, float g, bool listed, int64_t* first, int64_t rows,
                   int64_t uncond_num_rows, bool rows_ok, int32_t* status) {
  if (!has_uncond || g == 0.f) return false;
  if (listed && *first < 0) return false;
  if (!rows_ok || *first < 0 || *first + rows > uncond_num_rows) {
    *status |= kReqBadUncondRows;
    return false;
  }
  return true;
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

// Where a call keeps its requests' sampling values: for each a per-request array, or the call's
// scalar where the array is null. The loaders below read any struct with these field names:
// dds_sample_args (the CPU backend), the shard kernels' Args, and Values itself, which the
// kernels' parameters hold (a call without guidance gives no array and a zero scale).
struct Values {
  const float* guidance_scales;
  float guidance_scale;
  const float* temperatures;
  float temperature;
  const int32_t* top_ks;
  int32_t top_k;
  const float* top_ps;
  float top_p;
  const float* min_ps;
  float min_p;
  const uint64_t* seeds;
  uint64_t seed;
  const uint32_t* steps;
  uint32_t step;
};
template <class A>
Values values_of(const A& a) {
  return Values{a.guidance_scales, a.guidance_scale, a.temperatures, a.temperature, a.top_ks,
                a.top_k, a.top_ps, a.top_p, a.min_ps, a.min_p, a.seeds, a.seed, a.steps, a.step};
}
// Request r's values after the rules above; *status collects the DDS_REQ_* bits of what was
// sanitised.
struct Sampling {
  Tempering t;
  float g;
  int32_t k;
  float p, min_p;
  uint64_t seed;
  uint32_t step;
};
// Reads one element of a per-request array (the kernels pass one that loads through the
// read-only cache).
struct PlainLoad {
  template <typename T>
  DDS_HD T operator()(const T* p) const { return *p; }
};
// Request r's tempering and guidance scale (what decides whether it is guided), then its
// filters and noise key; sampling: both.
template <class V, class Load = PlainLoad>
DDS_HD void load_scaling(const V& v, int32_t r, Sampling* s, int32_t* status, Load ld = Load{}) {
  s->t = temperature(v.temperatures ? ld(v.temperatures + r) : v.temperature, status);
  s->g = guidance(v.guidance_scales ? ld(v.guidance_scales + r) : v.guidance_scale, status);
}
template <class V, class Load = PlainLoad>
DDS_HD void load_filters(const V& v, int32_t r, Sampling* s, int32_t* status, Load ld = Load{}) {
  s->k = top_k(v.top_ks ? ld(v.top_ks + r) : v.top_k, status);
  s->p = top_p(v.top_ps ? ld(v.top_ps + r) : v.top_p, status);
  s->min_p = min_p(v.min_ps ? ld(v.min_ps + r) : v.min_p, status);
  s->seed = v.seeds ? ld(v.seeds + r) : v.seed;
  s->step = v.steps ? ld(v.steps + r) : v.step;
}
template <class V, class Load = PlainLoad>
DDS_HD Sampling sampling(const V& v, int32_t r, int32_t* status, Load ld = Load{}) {
  Sampling s;
  load_scaling(v, r, &s, status, ld);
  load_filters(v, r, &s, status, ld);
  return s;
}
// Whether request r (rows [row_begin, row_begin + rows)) with sanitised guidance scale g is
// guided (guided's rule), given the call's unconditional tensor (has_uncond) and its
// uncond_row_offsets (null: the request's own rows); *ufirst = its first unconditional row (0
// when it is not guided).
template <class Load = PlainLoad>
DDS_HD bool uncond_rows(bool has_uncond, const int32_t* uncond_row_offsets, int32_t r,
                        int64_t row_begin, int64_t rows, int64_t uncond_num_rows, bool rows_ok,
                        float g, int64_t* ufirst, int32_t* status, Load ld = Load{}) {
  const bool listed = uncond_row_offsets != nullptr;
  const bool want = has_uncond && g != 0.f;  // (the offsets are read only then)
  int64_t first = !want ? 0 : listed ? (int64_t)ld(uncond_row_offsets + r) : row_begin;
  const bool is_guided = guided(want, g, listed, &first, rows, uncond_num_rows, rows_ok, status);
  *ufirst = is_guided ? first : 0;
  return is_guided;
}

// A request as the CPU backend, the shard code and verify read it: its values after the rules and
// its guidance decided (the sample kernels keep their own, smaller record).
struct Request {
  bool guided;
  int64_t uncond_first;  // its first unconditional row (0 when not guided)
  float g;
  bool greedy;
  float invT;
  int32_t k;
  float p;
  float min_p;
  uint64_t seed;
  uint32_t step;
  int32_t status;
};
// Request r of a call whose values are v (sampling), rows [row_begin, row_begin + rows) (rows_ok:
// its row offsets passed their rule; status: the bits already found), and whose unconditional
// tensor and offsets are has_uncond / uncond_row_offsets (uncond_rows).
template <class V>
DDS_HD Request request(const V& v, int32_t r, int64_t row_begin, int64_t rows, bool rows_ok,
                       bool has_uncond, const int32_t* uncond_row_offsets,
                       int64_t uncond_num_rows, int32_t status) {
  Request q;
  q.status = status;
  const Sampling s = sampling(v, r, &q.status);
  q.greedy = s.t.greedy;
  q.invT = s.t.invT;
  q.g = s.g;
  q.guided = uncond_rows(has_uncond, uncond_row_offsets, r, row_begin, rows, uncond_num_rows,
                         rows_ok, s.g, &q.uncond_first, &q.status);
  q.k = s.k;
  q.p = s.p;
  q.min_p = s.min_p;
  q.seed = s.seed;
  q.step = s.step;
  return q;
}

}  // namespace rule
}  // namespace dds

#endif  // DDS_KERNELS_COMMON_REQUEST_H_
