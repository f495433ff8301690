// The sample kernels for f32 logits (src/cuda_sample_dtype.h).
#include "cuda_sample_dtype.h"

DDS_SAMPLE_DTYPE_INSTANTIATE(::dds::kDtypeF32)
