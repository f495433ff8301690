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

dds_status cuda_sample_split_rows(const CudaContext& ctx, int32_t rows, int32_t* taken) {
  const ksample::SampleWorkspace w(ctx.config.max_rows, ctx.config.vocab_size);
  if (rows < 0 || (size_t)rows > w.sf_rows_n)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "sample_split_rows: rows (%d) is more than the %zu rows with split records", rows,
                w.sf_rows_n);
  if (rows == 0) return DDS_OK;
  if (taken == nullptr) return fail(DDS_ERR_NULL_POINTER, "sample_split_rows: taken is NULL");
  const char* ok = static_cast<const char*>(ctx.workspace) + w.sf_rows +
                   offsetof(ksample::SplitFiltRow, ok);
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess)
    e = cudaMemcpy2D(taken, sizeof(int32_t), ok, sizeof(ksample::SplitFiltRow), sizeof(int32_t),
                     (size_t)rows, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess)
    return fail(DDS_ERR_CUDA, "sample_split_rows: %s (%s)", cudaGetErrorName(e),
                cudaGetErrorString(e));
  return DDS_OK;
}

}  // namespace dds
