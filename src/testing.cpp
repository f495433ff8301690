// Internal hooks (testing.h).
#include "testing.h"

#include "internal.h"

namespace dds {
namespace testing {

dds_status set_sample_plan(dds_sampler* s, const ksample::SamplePlanOverrides& o) {
  if (!s) return fail(DDS_ERR_NULL_POINTER, "set_sample_plan: sampler is NULL");
  ksample::SamplePlanOverrides* p = s->backend->sample_plan_overrides();
  if (!p) return fail(DDS_ERR_UNSUPPORTED, "set_sample_plan: this backend has no launch plan");
  *p = o;
  return DDS_OK;
}

dds_status fill_shared_scratch(dds_sampler* s, unsigned char byte) {
  if (!s) return fail(DDS_ERR_NULL_POINTER, "fill_shared_scratch: sampler is NULL");
  return s->backend->fill_shared_scratch(byte);
}

dds_status sample_split_rows(dds_sampler* s, int32_t rows, int32_t* taken) {
  if (!s) return fail(DDS_ERR_NULL_POINTER, "sample_split_rows: sampler is NULL");
  return s->backend->sample_split_rows(rows, taken);
}

}  // namespace testing
}  // namespace dds
