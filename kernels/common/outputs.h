// The per-row outputs of a sampling call, as dds_sample_args names them, in one record for the
// sample kernels (SampleParams::out) and the shard code (shard::Args::out); host and device code.
// Every pointer may be null (that output is not wanted).
#ifndef DDS_KERNELS_COMMON_OUTPUTS_H_
#define DDS_KERNELS_COMMON_OUTPUTS_H_

#include <stdint.h>

#include "row.h"  // neg_inf, DDS_HD

namespace dds {

struct RowOutputs {
  int32_t* tokens;
  float* logprobs;
  int32_t* argmax;
  float* confidence;
  float* margin;
  float* entropy;
  void* probs;
  int32_t probs_dtype;
  int64_t probs_row_stride;
  int32_t* request_status;

  // Row i of a request without a finite column: token and argmax 0, log-probability -inf, the
  // other statistics 0 (docs/sampling.md §2).
  DDS_HD void write_empty(int32_t i) const {
    if (tokens) tokens[i] = 0;
    if (argmax) argmax[i] = 0;
    if (logprobs) logprobs[i] = neg_inf();
    if (confidence) confidence[i] = 0.f;
    if (margin) margin[i] = 0.f;
    if (entropy) entropy[i] = 0.f;
  }
  // Row i's token, first argmax column and statistics (float64 statistics round to float here).
  DDS_HD void write(int32_t i, int32_t token, int32_t amax, float logprob, float conf, float mgn,
                    float ent) const {
    if (tokens) tokens[i] = token;
    if (argmax) argmax[i] = amax;
    if (logprobs) logprobs[i] = logprob;
    if (confidence) confidence[i] = conf;
    if (margin) margin[i] = mgn;
    if (entropy) entropy[i] = ent;
  }
};

// The outputs of any struct with dds_sample_args' field names.
template <class A>
DDS_HD RowOutputs outputs_of(const A& a) {
  return RowOutputs{a.tokens, a.logprobs, a.argmax,  a.confidence,       a.margin,
                    a.entropy, a.probs,   a.probs_dtype, a.probs_row_stride, a.request_status};
}

}  // namespace dds

#endif  // DDS_KERNELS_COMMON_OUTPUTS_H_
