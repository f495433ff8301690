// Per-row output stores shared by every sampling kernel (write_outputs, write_empty, store_prob).
#ifndef DDS_KERNELS_SAMPLE_OUTPUTS_CUH_
#define DDS_KERNELS_SAMPLE_OUTPUTS_CUH_

#include "row.cuh"

namespace dds {
namespace ksample {

// ------------------------------------------------------------------------------------------------
// Output helpers
__device__ __forceinline__ void store_prob(void* base, int dt, long long idx, float v) {
  if (dt == 0) reinterpret_cast<float*>(base)[idx] = v;
  else if (dt == 1) reinterpret_cast<uint16_t*>(base)[idx] = f32_to_bf16(v);
  else reinterpret_cast<uint16_t*>(base)[idx] = f32_to_f16(v);
}

__device__ __forceinline__ void write_empty(const SampleParams& P, int row) {
  if (P.tokens) P.tokens[row] = 0;
  if (P.argmax) P.argmax[row] = 0;
  if (P.logprobs) P.logprobs[row] = neg_inf();
  if (P.confidence) P.confidence[row] = 0.f;
  if (P.margin) P.margin[row] = 0.f;
  if (P.entropy) P.entropy[row] = 0.f;
  RowInfo ri;
  ri.logS = 0;
  ri.M = 0.f;
  ri.mode = 3;
  ri.use_a = 0;
  ri.invT = 1.f;
  ri.token = 0;
  ri.kthr = 0;
  ri.cid = 0;
  ri.amin = 0;
  ri.empty = 1;
  P.rowinfo[row] = ri;
}

__device__ __forceinline__ void write_outputs(const SampleParams& P, int row, int token, int amax,
                                              double logprob, double conf, double margin,
                                              double ent) {
  if (P.tokens) P.tokens[row] = token;
  if (P.argmax) P.argmax[row] = amax;
  if (P.logprobs) P.logprobs[row] = (float)logprob;
  if (P.confidence) P.confidence[row] = (float)conf;
  if (P.margin) P.margin[row] = (float)margin;
  if (P.entropy) P.entropy[row] = (float)ent;
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_OUTPUTS_CUH_
