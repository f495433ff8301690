// How every operation's launcher queues a kernel: cudaLaunchKernelEx with the grid, block and
// dynamic shared memory on the caller's stream. (The host emulation, tests/emu, provides
// cudaLaunchKernelEx and runs the kernel there, so the launchers are the same code in both.)
#ifndef DDS_KERNELS_COMMON_LAUNCH_CUH_
#define DDS_KERNELS_COMMON_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <type_traits>

namespace dds {

template <typename... KA, typename... A>
inline void launch_kernel(cudaStream_t s, void (*k)(KA...), dim3 grid, dim3 block, size_t smem,
                          A&&... a) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  (void)cudaLaunchKernelEx(&cfg, k, static_cast<A&&>(a)...);
}

// Two run-time flags as compile-time ones, for choosing a kernel's instantiation:
// f(std::bool_constant<a>{}, std::bool_constant<b>{}) (usable as template arguments).
template <typename F>
inline void with_flags(bool a, bool b, F f) {
  using Y = std::true_type;
  using N = std::false_type;
  if (a) {
    if (b) f(Y{}, Y{});
    else f(Y{}, N{});
  } else {
    if (b) f(N{}, Y{});
    else f(N{}, N{});
  }
}

}  // namespace dds

#endif  // DDS_KERNELS_COMMON_LAUNCH_CUH_
