// The CUDA backend: device selection, workspace, pointer checks and kernel dispatch.
// (Kernels live in kernels/ and know nothing of handles.)
#include <cuda_runtime.h>

#include <cstring>

#include "cuda_internal.h"

namespace dds {
namespace {

dds_status cuda_fail(cudaError_t e, const char* fn, const char* what) {
  return fail(DDS_ERR_CUDA, "%s: %s failed: %s (%s)", fn, what, cudaGetErrorName(e),
              cudaGetErrorString(e));
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const dds_sampler_config& cfg) : cfg_(cfg) { ctx_.config = cfg; }
  ~CudaBackend() override {
    if (ctx_.workspace) {
      int prev = 0;
      cudaGetDevice(&prev);
      cudaSetDevice(ctx_.device);
      cudaFree(ctx_.workspace);
      cudaSetDevice(prev);
    }
  }

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
    ctx_.device = cfg_.device;
    int prev = 0;
    cudaGetDevice(&prev);
    if ((e = cudaSetDevice(ctx_.device)) != cudaSuccess) return cuda_fail(e, "dds_create", "cudaSetDevice");
    cudaDeviceGetAttribute(&ctx_.num_sms, cudaDevAttrMultiProcessorCount, ctx_.device);
    cudaDeviceGetAttribute(&ctx_.cc_major, cudaDevAttrComputeCapabilityMajor, ctx_.device);
    cudaDeviceGetAttribute(&ctx_.cc_minor, cudaDevAttrComputeCapabilityMinor, ctx_.device);
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx_.device);
    ctx_.smem_optin = (size_t)optin;
    size_t a = cuda_sample_workspace_bytes(cfg_), b = cuda_stash_workspace_bytes(cfg_);
    ctx_.workspace_bytes = a > b ? a : b;
    for (size_t v : {cuda_verify_workspace_bytes(cfg_), cuda_reveal_workspace_bytes(cfg_)})
      if (v > ctx_.workspace_bytes) ctx_.workspace_bytes = v;
    if (ctx_.workspace_bytes > 0) {
      e = cudaMalloc(&ctx_.workspace, ctx_.workspace_bytes);
      if (e != cudaSuccess) {
        cudaGetLastError();
        cudaSetDevice(prev);
        return fail(DDS_ERR_OUT_OF_MEMORY, "dds_create: cudaMalloc of the %zu-byte workspace failed: %s",
                    ctx_.workspace_bytes, cudaGetErrorString(e));
      }
      // Zero it once: kernels may rely on counters that they reset themselves after use.
      cudaMemset(ctx_.workspace, 0, ctx_.workspace_bytes);
      cudaDeviceSynchronize();
    }
    cudaSetDevice(prev);
    return DDS_OK;
  }

  dds_status sample(const dds_sample_args& a, dds_stream stream) override {
    DeviceGuard g(ctx_.device);
    return cuda_sample(ctx_, a, (cudaStream_t)stream);
  }
  dds_status stash(const dds_stash_args& a, dds_stream stream) override {
    DeviceGuard g(ctx_.device);
    return cuda_stash(ctx_, a, (cudaStream_t)stream);
  }

  dds_status reveal(const dds_reveal_args& a, dds_stream stream) override {
    DeviceGuard g(ctx_.device);
    return cuda_reveal(ctx_, a, (cudaStream_t)stream);
  }
  dds_status verify(const dds_verify_args& a, dds_stream stream) override {
    DeviceGuard g(ctx_.device);
    return cuda_verify(ctx_, a, (cudaStream_t)stream);
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

  ksample::SamplePlanOverrides* sample_plan_overrides() override { return &ctx_.sample_overrides; }

  dds_status sample_split_rows(int32_t rows, int32_t* taken) override {
    DeviceGuard g(ctx_.device);
    return cuda_sample_split_rows(ctx_, rows, taken);
  }

  // [0, the stash region): the stash's own region keeps its zero-at-rest counters.
  dds_status fill_shared_scratch(unsigned char byte) override {
    const size_t stash = cuda_stash_region_bytes(cfg_);
    if (!ctx_.workspace || ctx_.workspace_bytes <= stash) return DDS_OK;
    DeviceGuard g(ctx_.device);
    cudaError_t e = cudaMemset(ctx_.workspace, byte, ctx_.workspace_bytes - stash);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_fail(e, "fill_shared_scratch", "cudaMemset");
    return DDS_OK;
  }

 private:
  // Makes the sampler's device current for the call, restores the caller's afterwards.
  struct DeviceGuard {
    int prev = -1;
    explicit DeviceGuard(int dev) {
      cudaGetDevice(&prev);
      if (prev != dev) cudaSetDevice(dev);
      else prev = -1;
    }
    ~DeviceGuard() {
      if (prev >= 0) cudaSetDevice(prev);
    }
  };
  dds_sampler_config cfg_;
  CudaContext ctx_;
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
