// Internal hooks for the tests, the host emulation and the benchmark's A/B runs; not part of the
// ABI (hidden, not exported from libdds.so: link the static dds_internal to use them).
#ifndef DDS_SRC_TESTING_H_
#define DDS_SRC_TESTING_H_

#include "dds/dds.h"
#include "sample/plan.h"

namespace dds {
namespace testing {

// Forces choices of dds_sample's launch plan on a CUDA sampler (kernels/sample/plan.h); every
// output stays the same bits, only the kernels that compute them change. Returns
// DDS_ERR_UNSUPPORTED for a sampler without a launch plan (the CPU backend). Command lines
// give the overrides as text: ksample::parse_plan_overrides.
dds_status set_sample_plan(dds_sampler* s, const ksample::SamplePlanOverrides& o);

// Fills the device scratch that dds_sample, dds_verify_drafts and dds_reveal share with `byte`
// (a CUDA sampler; the stash's own region is left alone), as another operation's use leaves it:
// no call may rely on it being zero. DDS_ERR_UNSUPPORTED on the CPU backend.
dds_status fill_shared_scratch(dds_sampler* s, unsigned char byte);

// After a dds_sample call on a CUDA sampler, taken[r] = row r's split record flag as the kernels
// left it, for r < rows: 1 where the call's split fallback (kernels/sample/split_filter.cuh) took
// the row, 0 where it did not (synchronises the device).
// The records are the last call's only where its plan ran the split fallback (plan.split_filter):
// a caller that fills the shared scratch with 0 before the call reads all zeros otherwise.
// DDS_ERR_INVALID_ARGUMENT for more rows than the workspace holds records for (none when V <=
// kSplitFiltMinV); DDS_ERR_UNSUPPORTED on the CPU backend.
dds_status sample_split_rows(dds_sampler* s, int32_t rows, int32_t* taken);

}  // namespace testing
}  // namespace dds

#endif  // DDS_SRC_TESTING_H_
