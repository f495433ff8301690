// Vocabulary-parallel sampling on CUDA (include/dds/dds_shard.h, docs/vocab_parallel.md).
//
// First version, correctness first: one thread per row runs the per-row logic of
// kernels/shard.cuh (the same code, the same summation order as the CPU backend), so the GPU
// records and outputs equal the CPU ones up to the device libm (exp/log within an ulp or two).
// It is graph-safe (no allocation, no host synchronisation, no device reads on the host) but not
// fast: a row's slice is read by one thread. The planned shape is a CTA (or cluster) per row with
// the row statistics pass of kernels/sample.cuh, writing the same records.
#include <cuda_runtime.h>

#include "cuda_internal.h"
#include "internal.h"
#include "shard.cuh"

namespace dds {
namespace {

constexpr int kThreads = 64;

__global__ void shard_partial_kernel(shard::Call c, int32_t round, int32_t kind, unsigned char* out) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c.a.num_rows) return;
  unsigned char* rowp = out + c.row_bytes[round] * i;
  if (kind == DDS_SHARD_ROUND_STATS)
    shard::partial_stats_row(c, i, rowp);
  else if (kind == DDS_SHARD_ROUND_RADIX)
    shard::partial_radix_row(c, round, i, rowp);
  else
    shard::partial_kept_row(c, i, rowp);
}

__global__ void shard_status_kernel(shard::Call c) {
  const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= c.a.num_requests) return;
  c.a.request_status[r] = shard::call_params(c, r).status;
}

__global__ void shard_finish_kernel(shard::Call c) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c.a.num_rows) return;
  const int32_t flags = shard::finish_row(c, i);
  if (flags && c.a.request_status) atomicOr(&c.a.request_status[shard::row_request(c.a, i)], flags);
}

// Makes the sampler's device current for the call and restores the caller's afterwards.
struct DeviceGuard {
  int prev = -1;
  cudaError_t err = cudaSuccess;
  explicit DeviceGuard(int dev) {
    cudaGetDevice(&prev);
    if (prev != dev) err = cudaSetDevice(dev);
  }
  ~DeviceGuard() {
    int cur = -1;
    cudaGetDevice(&cur);
    if (prev >= 0 && cur != prev) cudaSetDevice(prev);
  }
};

dds_status device_error(const char* fn, int device, cudaError_t e) {
  return fail(DDS_ERR_CUDA, "%s: cudaSetDevice(%d) failed: %s", fn, device, cudaGetErrorString(e));
}

}  // namespace

dds_status cuda_shard_partial(const shard::Call& c, int32_t round, void* record_out, int device,
                              dds_stream stream) {
  const char* fn = "dds_sample_partial";
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return device_error(fn, device, guard.err);
  const int32_t kind = round == 0 ? DDS_SHARD_ROUND_STATS
                       : round == c.kept_round ? DDS_SHARD_ROUND_KEPT
                                               : DDS_SHARD_ROUND_RADIX;
  const int blocks = (c.a.num_rows + kThreads - 1) / kThreads;
  shard_partial_kernel<<<blocks, kThreads, 0, (cudaStream_t)stream>>>(
      c, round, kind, static_cast<unsigned char*>(record_out));
  return check_launch(fn);
}

dds_status cuda_shard_finish(const shard::Call& c, int device, dds_stream stream) {
  const char* fn = "dds_sample_finish";
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return device_error(fn, device, guard.err);
  dds_status st = DDS_OK;
  if (c.a.request_status) {
    shard_status_kernel<<<(c.a.num_requests + kThreads - 1) / kThreads, kThreads, 0,
                          (cudaStream_t)stream>>>(c);
    if ((st = check_launch(fn)) != DDS_OK) return st;
  }
  shard_finish_kernel<<<(c.a.num_rows + kThreads - 1) / kThreads, kThreads, 0,
                        (cudaStream_t)stream>>>(c);
  return check_launch(fn);
}

}  // namespace dds
