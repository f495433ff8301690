// How every operation's launcher queues a kernel: cudaLaunchKernelEx with the grid, block and
// dynamic shared memory on the caller's stream. (The host emulation, tests/emu, provides
// cudaLaunchKernelEx and runs the kernel there, so the launchers are the same code in both.)
#ifndef DDS_KERNELS_COMMON_LAUNCH_CUH_
#define DDS_KERNELS_COMMON_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <type_traits>

namespace dds {

// With `overlap`, also the programmatic-dependent-launch attribute: the kernel may start while
// the stream's previous grid still runs, once each of that grid's CTAs has called pdl_trigger or
// exited (kernels/common/device.cuh says how such a kernel waits for its inputs).
template <typename... KA, typename... A>
inline void launch_kernel_overlapped(bool overlap, cudaStream_t s, void (*k)(KA...), dim3 grid,
                                     dim3 block, size_t smem, A&&... a) {
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = overlap ? attr : nullptr;
  cfg.numAttrs = overlap ? 1u : 0u;
  (void)cudaLaunchKernelEx(&cfg, k, static_cast<A&&>(a)...);
}
template <typename... KA, typename... A>
inline void launch_kernel(cudaStream_t s, void (*k)(KA...), dim3 grid, dim3 block, size_t smem,
                          A&&... a) {
  launch_kernel_overlapped(false, s, k, grid, block, smem, static_cast<A&&>(a)...);
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
