// Per-row output stores shared by every sampling kernel (write_empty with the row's RowInfo,
// store_prob; the outputs themselves: RowOutputs, kernels/common/outputs.h).
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
  P.out.write_empty(row);
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

// A sampled row's statistics from the sums of the distribution it reports, taken relative to
// that distribution's maximum M: S = sum e, E = sum e (x - M), e = exp(x - M), logS = log(S), x
// the guided l (mode 0, use_a 0), the tempered a (mode 0, use_a 1) or the kept set's a (mode 2);
// xt: the token's x, x2: the runner-up's (has2 false: none, so margin = confidence). Sets ri's
// fields of the distribution; write_row stores both.
struct RowStats {
  double logprob, conf, margin, ent;
};
__device__ __forceinline__ RowStats row_stats(RowInfo& ri, int mode, int use_a, float M,
                                              double logS, double S, double E, float xt,
                                              bool has2, float x2) {
  RowStats r;
  r.logprob = ((double)xt - (double)M) - logS;
  r.conf = exp(-logS);
  const double p2 = has2 ? exp(((double)x2 - (double)M) - logS) : 0.0;
  r.margin = r.conf - p2;
  r.ent = logS - E / S;
  ri.mode = mode;
  ri.use_a = use_a;
  ri.logS = logS;
  ri.M = M;
  return r;
}
__device__ __forceinline__ void write_row(const SampleParams& P, int row, int token, int amax,
                                          RowStats st, const RowInfo& ri) {
  if (st.ent < 0) st.ent = 0;
  P.out.write(row, token, amax, st.logprob, st.conf, st.margin, st.ent);
  P.rowinfo[row] = ri;
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_OUTPUTS_CUH_
