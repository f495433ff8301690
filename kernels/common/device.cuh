// The device-only instructions the kernels use, each behind one name, with the form the host
// emulation compiles (tests/emu builds the kernel headers with g++: __CUDA_ARCH__ undefined), and
// the declaration of a kernel's dynamic shared memory (DDS_DYNAMIC_SMEM, which the emulation
// defines before including the kernels). Nothing else in the kernels needs to know about the
// emulation.
#ifndef DDS_KERNELS_COMMON_DEVICE_CUH_
#define DDS_KERNELS_COMMON_DEVICE_CUH_

#include <cmath>

namespace dds {

// 2^x (MUFU.EX2, flushes results below 2^-126 to 0).
__device__ __forceinline__ float ex2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

}  // namespace dds

// `extern __shared__ unsigned char name[]`, 16-byte aligned: a kernel's dynamic shared memory.
#ifndef DDS_DYNAMIC_SMEM
#define DDS_DYNAMIC_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

#endif  // DDS_KERNELS_COMMON_DEVICE_CUH_
