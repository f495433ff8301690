// Shared by the one-shape profiling programs (profile_sample.cu, profile_stash.cu): the device
// fill of sigma * N(0, 1) logits and the median of a call's time over a few calls.
#ifndef DDS_BENCH_PROFILE_COMMON_H_
#define DDS_BENCH_PROFILE_COMMON_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dds/dds.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_common.h"  // make_cuda_sampler

// p[i] = 2 N(0, 1) (Box-Muller on a hash of i and seed), f32 or bf16.
__global__ void fill(void* p, size_t n, int bf16, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 0x2c1b3c6dU; h ^= h >> 12; h *= 0x297a2d39U; h ^= h >> 15;
    unsigned g = h * 0x9e3779b9u + 0x7f4a7c15u; g ^= g >> 16; g *= 0x85ebca6bU; g ^= g >> 13;
    const float u1 = ((h >> 8) + 1) * (1.f / 16777217.f), u2 = (g >> 8) * (1.f / 16777216.f);
    const float x = 2.f * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if (bf16) ((__nv_bfloat16*)p)[i] = __float2bfloat16(x); else ((float*)p)[i] = x;
  }
}

// Median time in us of call(i), i = 0 .. calls - 1, each between two CUDA events on the default
// stream (unreliable under a profiler, which serialises and replays kernels). A false return of
// call stops the loop: -1.
template <typename F>
float median_call_us(int calls, F call) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  for (int i = 0; i < calls; ++i) {
    cudaEventRecord(e0);
    if (!call(i)) return -1.f;
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1000.f);
  }
  std::sort(t.begin(), t.end());
  return t.empty() ? -1.f : t[t.size() / 2];
}

#endif  // DDS_BENCH_PROFILE_COMMON_H_
