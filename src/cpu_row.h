// The CPU backend's row model: a request's parameters after the rules of kernels/common/request.h
// (one function), and the per-column transform of §2 (small inline functions that the row loops
// call). Guidance is kernels/common/row.h's row::guide; sanitize and temper are the vectorisable
// twins of row::sanitize / row::temper (compare-and-select: GCC turns these loops into SIMD
// blends, not the fmin / fmax of the device forms), the same values for every input.
#ifndef DDS_SRC_CPU_ROW_H_
#define DDS_SRC_CPU_ROW_H_

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "dds/dds.h"
#include "dtype.h"
#include "request.h"  // kernels/common: the per-request rules
#include "row.h"      // kernels/common: the row model

namespace dds {
namespace cpu {

constexpr float kInf = std::numeric_limits<float>::infinity();

// NaN -> -inf, +inf -> FLT_MAX (docs/sampling.md §2).
inline float sanitize(float x) {
  if (std::isnan(x)) return -kInf;
  if (x == kInf) return FLT_MAX;
  return x;
}

// §2 for one column (the ban is applied by the caller): row::guide for a guided request, c
// otherwise; then sanitised.
inline float row_logit(float c, float u, float g, bool guided) {
  return sanitize(guided ? row::guide(c, u, g) : c);
}

// §3 temperature: a = l * invT in fp32; +inf -> FLT_MAX, and a finite l whose product overflows
// to -inf stays in the row as -FLT_MAX (a column at -inf made the filters NaN; found by reading,
// tests/fuzz/fuzz_sample re-finds it).
inline float temper(float l, float invT) {
  const float v = l * invT;
  if (v == kInf) return FLT_MAX;
  if (v == -kInf && l > -kInf) return -FLT_MAX;
  return v;
}

// A row of `dtype` values as fp32: `src` itself for F32, else converted into buf[0, V).
inline const float* row_as_f32(const void* base, int32_t dtype, int64_t offset, int32_t V,
                               float* buf) {
  switch (dtype) {
    case DDS_DTYPE_F32: return static_cast<const float*>(base) + offset;
    case DDS_DTYPE_BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + offset;
      for (int32_t t = 0; t < V; ++t) buf[t] = bf16_to_f32(s[t]);
      return buf;
    }
    default: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + offset;
      for (int32_t t = 0; t < V; ++t) buf[t] = f16_to_f32(s[t]);
      return buf;
    }
  }
}

// Request parameters after the sanitisation rules of docs/sampling.md §1 (rule::Request).
using RequestParams = rule::Request;

// rows_in_request < 0: the request's row offsets are flagged (it owns no rows): never guided.
inline RequestParams request_params(const dds_sample_args& a, int32_t r, int32_t rows_in_request) {
  return rule::request(a, r, (int64_t)(a.row_offsets ? a.row_offsets[r] : r), rows_in_request,
                       rows_in_request >= 0, a.uncond_logits != nullptr, a.uncond_row_offsets,
                       a.uncond_num_rows, 0);
}

}  // namespace cpu
}  // namespace dds

#endif  // DDS_SRC_CPU_ROW_H_
