// dds_sample on the CUDA backend: the validated arguments as the kernels' parameter block
// (sample_params.h), the launch plan for this shape and device (kernels/sample/plan.h), the
// kernels queued on the caller's stream (kernels/sample/launch.cuh). No allocation, no host
// synchronisation, no device-to-host read: per-request values are read (and sanitised) inside
// the kernels, so the call is graph-capturable.
#include "cuda_sample_dtype.h"  // first: the kernels are in cuda_sample_{f32,bf16,f16}.cu

namespace dds {

size_t cuda_sample_workspace_bytes(const dds_sampler_config& cfg) {
  // Called at dds_create with the sampler's device current: also the place to raise the filter
  // kernel's dynamic shared memory limit once (not a stream operation).
  ksample::prepare_sample_kernels();
  cudaGetLastError();
  return ksample::SampleWorkspace(cfg.max_rows, cfg.vocab_size).total;
}

dds_status cuda_sample(const CudaContext& ctx, const dds_sample_args& a, cudaStream_t stream) {
  const int V = ctx.config.vocab_size;
  const ksample::SampleWorkspace w(ctx.config.max_rows, V);
  if (ctx.workspace == nullptr || ctx.workspace_bytes < w.total)
    return fail(DDS_ERR_INTERNAL, "dds_sample: the CUDA workspace is smaller than needed");
  ksample::SampleParams P = sample_params(a, V);
  w.bind(P, static_cast<char*>(ctx.workspace));
  const ksample::SamplePlan plan =
      ksample::plan_sample(sample_shape(a, V, ctx.num_sms), ctx.sample_overrides);
  const cudaError_t e = ksample::launch_sample(a.dtype, P, plan, stream);
  if (e != cudaSuccess)
    return fail(DDS_ERR_CUDA, "dds_sample: kernel launch failed: %s (%s)", cudaGetErrorName(e),
                cudaGetErrorString(e));
  return DDS_OK;
}

}  // namespace dds
