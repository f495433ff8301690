// Stand-in for the CUDA backend when libdds is built without CUDA (DDS_WITH_CUDA=OFF or no
// toolkit found).
#if !defined(DDS_HAVE_CUDA)
#include "internal.h"

namespace dds {
dds_status make_cuda_backend(const dds_sampler_config&, std::unique_ptr<Backend>*) {
  return fail(DDS_ERR_NO_DEVICE,
              "dds_create: config->backend is DDS_BACKEND_CUDA but this libdds was built without "
              "CUDA (rebuild with -DDDS_WITH_CUDA=ON and a CUDA toolkit)");
}
bool cuda_backend_built() { return false; }
}  // namespace dds
#endif
