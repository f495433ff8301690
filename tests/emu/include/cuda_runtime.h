// The host emulation's cuda_runtime.h: the kernel headers include it as they are (tests/emu puts
// this folder first on the include path), and get the emulated device features (cuda_emu.h,
// cuda_emu_sample.h) plus the runtime calls their launchers make: cudaLaunchKernelEx runs the
// kernel over its grid (emu_launch), cudaMemsetAsync is a memset, attributes are accepted, the
// occupancy query answers one CTA per SM.
#pragma once
#include <cstring>
#include <functional>

#include "cuda_emu_sample.h"

// A kernel's dynamic shared memory: the emulation's one buffer (blocks run one at a time).
#define DDS_DYNAMIC_SMEM(name) unsigned char* name = g_dynsmem

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 6 };
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  union {
    int programmaticStreamSerializationAllowed;
  } val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes = 0;
  cudaStream_t stream = nullptr;
  cudaLaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <typename K>
inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int) { return cudaSuccess; }
// One CTA per SM: blocks run one after another, so a launcher's grid is its SM count.
template <typename K>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, K, int, size_t) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t = nullptr) {
  std::memset(p, v, n);
  return cudaSuccess;
}
// Called with each kernel before it runs (a harness may inspect the state between kernels).
inline std::function<void(const void* kernel)> g_emu_before_launch;
template <typename... KA, typename... A>
inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* c, void (*k)(KA...), A&&... a) {
  if (c->dynamicSmemBytes > sizeof g_dynsmem_buf) {
    fprintf(stderr, "emulation: %zu bytes of dynamic shared memory asked for\n", c->dynamicSmemBytes);
    abort();
  }
  if (g_emu_before_launch) g_emu_before_launch(reinterpret_cast<const void*>(k));
  emu_launch(c->gridDim.x, c->blockDim.x, [&] { k(a...); });
  return cudaSuccess;
}
