// The CUDA backend: device selection, workspace, pointer checks and kernel dispatch.
// (Kernels live in kernels/ and know nothing of handles.)
#include <cuda_runtime.h>

#include <cstring>

#include "internal.h"

namespace dds {
namespace {

dds_status cuda_fail(cudaError_t e, const char* fn, const char* what) {
  return fail(DDS_ERR_CUDA, "%s: %s failed: %s (%s)", fn, what, cudaGetErrorName(e),
              cudaGetErrorString(e));
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const dds_sampler_config& cfg) : cfg_(cfg) {}
  ~CudaBackend() override {}

  dds_status init() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      return fail(DDS_ERR_NO_DEVICE,
                  "dds_create: config->backend is DDS_BACKEND_CUDA but no CUDA device is "
                  "available (%s)",
                  e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
    }
    if (cfg_.device >= count)
      return fail(DDS_ERR_NO_DEVICE, "dds_create: config->device (%d) must be < the %d CUDA device(s)",
                  cfg_.device, count);
    return DDS_OK;
  }

  dds_status sample(const dds_sample_args&, dds_stream) override {
    return fail(DDS_ERR_UNSUPPORTED, "dds_sample: the CUDA kernels are not built yet");
  }
  dds_status stash(const dds_stash_args&, dds_stream) override {
    return fail(DDS_ERR_UNSUPPORTED, "dds_stash_logprobs: the CUDA kernels are not built yet");
  }

  dds_status copy_to_host(void* dst, const void* src, size_t bytes, dds_stream stream) override {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess) return cuda_fail(e, "debug check", "cudaMemcpyAsync");
    return DDS_OK;
  }

  dds_status check_pointer(const void* p, const char* fn, const char* name) override {
    cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->%s (%p) is not a CUDA device pointer", fn,
                  name, p);
    }
    if (attr.type == cudaMemoryTypeManaged) return DDS_OK;
    if (attr.type != cudaMemoryTypeDevice)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: args->%s (%p) is host memory; the CUDA backend needs device or managed "
                  "memory",
                  fn, name, p);
    if (attr.device != cfg_.device)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: args->%s (%p) lives on device %d but the sampler uses device %d", fn, name, p,
                  attr.device, cfg_.device);
    return DDS_OK;
  }
  bool host_readable() const override { return false; }

 private:
  dds_sampler_config cfg_;
};

}  // namespace

dds_status make_cuda_backend(const dds_sampler_config& cfg, std::unique_ptr<Backend>* out) {
  std::unique_ptr<CudaBackend> be(new CudaBackend(cfg));
  dds_status st = be->init();
  if (st != DDS_OK) return st;
  *out = std::move(be);
  return DDS_OK;
}
bool cuda_backend_built() { return true; }

}  // namespace dds
