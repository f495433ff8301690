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

}  // namespace testing
}  // namespace dds
