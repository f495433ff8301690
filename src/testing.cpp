// Internal hooks (testing.h).
#include "testing.h"

#include <cstdlib>
#include <cstring>

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

bool parse_sample_plan(const char* text, ksample::SamplePlanOverrides* o, const char** err) {
  struct Key {
    const char* name;
    int ksample::SamplePlanOverrides::*field;
  };
  static const Key keys[] = {
      {"small_plain", &ksample::SamplePlanOverrides::small_plain},
      {"small_filter", &ksample::SamplePlanOverrides::small_filter},
      {"cta", &ksample::SamplePlanOverrides::cta},
      {"bpw", &ksample::SamplePlanOverrides::bpw},
      {"fuse", &ksample::SamplePlanOverrides::fuse},
      {"direct", &ksample::SamplePlanOverrides::direct},
      {"fbpw", &ksample::SamplePlanOverrides::fbpw},
      {"top2", &ksample::SamplePlanOverrides::top2},
      {"cf_wpc", &ksample::SamplePlanOverrides::cf_wpc},
      {"smem_row", &ksample::SamplePlanOverrides::smem_row},
      {"exact_all", &ksample::SamplePlanOverrides::exact_all},
      {"filter_grid", &ksample::SamplePlanOverrides::filter_grid},
  };
  *o = ksample::SamplePlanOverrides{};
  for (const char* p = text; p && *p;) {
    const char* end = std::strchr(p, ',');
    const size_t n = end ? (size_t)(end - p) : std::strlen(p);
    if (!(n == 7 && std::strncmp(p, "default", 7) == 0)) {
      const char* eq = static_cast<const char*>(std::memchr(p, '=', n));
      const Key* k = nullptr;
      if (eq)
        for (const Key& c : keys)
          if (std::strlen(c.name) == (size_t)(eq - p) && std::strncmp(p, c.name, eq - p) == 0) k = &c;
      if (!k) {
        if (err) *err = p;
        return false;
      }
      o->*(k->field) = std::atoi(eq + 1);
    }
    p = end ? end + 1 : nullptr;
  }
  return true;
}

}  // namespace testing
}  // namespace dds
