// dds_sample's arguments as the kernels' parameter block and plan shape: the one translation
// from the public API to kernels/sample (used by the CUDA backend, cuda_sample.cu, and the
// host emulation of the kernels, tests/emu). Arguments are validated by api.cpp before this.
#ifndef DDS_SRC_SAMPLE_PARAMS_H_
#define DDS_SRC_SAMPLE_PARAMS_H_

#include <cstdint>

#include "internal.h"  // dtype_size
#include "sample/launch.cuh"

namespace dds {

// The parameter block (scratch fields unset: SampleWorkspace::bind).
inline ksample::SampleParams sample_params(const dds_sample_args& a, int V) {
  ksample::SampleParams P{};
  P.V = V;
  P.nblocks = (V + ksample::kB - 1) / ksample::kB;
  P.num_rows = a.num_rows;
  P.num_requests = a.num_requests;
  P.row_offsets = a.row_offsets;
  P.positions = a.positions;
  P.logits = a.logits;
  P.row_stride = a.row_stride;
  P.uncond = a.uncond_logits;
  P.uncond_stride = a.uncond_row_stride;
  P.uncond_num_rows = a.uncond_num_rows;
  P.uncond_row_offsets = a.uncond_row_offsets;
  P.vals = rule::values_of(a);
  P.banned = a.banned_token;
  P.allowed = a.allowed_token_masks;
  P.allowed_stride = a.allowed_mask_stride;
  P.stats_guided = a.stats == DDS_STATS_GUIDED;
  P.want_stats = (a.logprobs || a.confidence || a.margin || a.entropy || a.probs) ? 1 : 0;
  P.out = outputs_of(a);
  // 16-byte vector loads when both logits tensors allow them.
  const size_t esz = dtype_size(a.dtype);
  bool vec = ((uintptr_t)a.logits % 16 == 0) && ((size_t)a.row_stride * esz) % 16 == 0;
  if (a.uncond_logits)
    vec = vec && ((uintptr_t)a.uncond_logits % 16 == 0) &&
          ((size_t)a.uncond_row_stride * esz) % 16 == 0;
  P.vec_ok = vec ? 1 : 0;
  return P;
}

// The plan's inputs. Which row kernels can have work comes from the host-visible scalars only
// (device arrays may change between graph replays, so any array means "maybe").
inline ksample::SampleShape sample_shape(const dds_sample_args& a, int V, int num_sms) {
  const bool arrays = a.top_ks || a.top_ps || a.min_ps;
  const bool scalar_filter = (a.top_k > 0 && a.top_k < V) || a.top_p < 1.f || a.min_p > 0.f;
  const float invT = a.temperature > 0.f ? 1.0f / a.temperature : 0.f;
  const bool scalar_greedy = !(a.temperature > 0.f) || invT > 3.0e38f;
  const bool all_filtered = !arrays && scalar_filter && !a.temperatures && !scalar_greedy;
  const bool none_filtered = !arrays && !scalar_filter;
  ksample::SampleShape s;
  s.V = V;
  s.num_rows = a.num_rows;
  s.dtype = a.dtype;  // dds_dtype: the kernels' DT
  s.run_plain = !all_filtered;
  s.run_filter = !none_filtered;
  s.run_top_p = a.top_ps != nullptr || (a.top_p > 0.f && a.top_p < 1.f);
  s.num_sms = num_sms;
  return s;
}

}  // namespace dds

#endif  // DDS_SRC_SAMPLE_PARAMS_H_
