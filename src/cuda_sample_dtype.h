// The sample kernels of each logits dtype are compiled in a translation unit of their own
// (cuda_sample_f32.cu, cuda_sample_bf16.cu, cuda_sample_f16.cu: explicit instantiations of
// launch_sample_dt and prepare_filter_kernel), so that the three compile in parallel. Every
// translation unit of the sample kernels includes this header first: with
// DDS_SAMPLE_DTYPES_APART, kernels/sample/launch.cuh declares the three extern, so neither the
// dispatcher (cuda_sample.cu) nor a dtype's unit instantiates another dtype's kernels.
#ifndef DDS_SRC_CUDA_SAMPLE_DTYPE_H_
#define DDS_SRC_CUDA_SAMPLE_DTYPE_H_

#define DDS_SAMPLE_DTYPES_APART
#include "cuda_internal.h"
#include "sample_params.h"

#define DDS_SAMPLE_DTYPE_INSTANTIATE(DT)                                                       \
  namespace dds {                                                                              \
  namespace ksample {                                                                          \
  template cudaError_t launch_sample_dt<DT>(SampleParams, const SamplePlan&, cudaStream_t);     \
  template cudaError_t prepare_filter_kernel<DT>(int);                                         \
  }                                                                                            \
  }

#endif  // DDS_SRC_CUDA_SAMPLE_DTYPE_H_
