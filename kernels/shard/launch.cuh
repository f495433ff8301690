// Host side of the vocabulary-parallel kernels: launch_partial and launch_finish queue one round's
// or the finish's kernels on the stream (kernels/shard/shard.cuh lists them). The caller makes the
// sampler's device current.
#ifndef DDS_KERNELS_SHARD_LAUNCH_CUH_
#define DDS_KERNELS_SHARD_LAUNCH_CUH_

#include "../common/launch.cuh"
#include "finish.cuh"
#include "rounds.cuh"
#include "stats.cuh"

namespace dds {
namespace kshard {

// Whether the slice touches at most kMaxBlocks blocks (the CTA kernels; else slow_partial_kernel).
inline bool fast_path(const Call& c) {
  const int32_t nblk = (c.off + c.Vs - 1) / kB - c.off / kB + 1;
  return nblk <= kMaxBlocks;
}

template <int DT>
inline void launch_partial_dt(const Call& c, int32_t round, int32_t kind, unsigned char* out,
                              cudaStream_t s) {
  const unsigned grid = (unsigned)c.a.num_rows;
  if (kind == shard::kRoundStats) launch_kernel(s, stats_kernel<DT>, grid, kThreads, 0, c, out);
  else if (kind == shard::kRoundRadix) launch_kernel(s, radix_kernel<DT>, grid, kThreads, 0, c, round, out);
  else launch_kernel(s, kept_kernel<DT>, grid, kThreads, 0, c, out);
}

// Round `round` of this rank into `out` (its record of the round). Returns the launch error.
inline cudaError_t launch_partial(const Call& c, int32_t round, unsigned char* out, cudaStream_t s) {
  const int32_t kind = round == 0 ? shard::kRoundStats
                       : round == c.kept_round ? shard::kRoundKept
                                               : shard::kRoundRadix;
  if (!fast_path(c)) {
    const int blocks = (c.a.num_rows + kSlowThreads - 1) / kSlowThreads;
    launch_kernel(s, slow_partial_kernel, (unsigned)blocks, kSlowThreads, 0, c, round, kind, out);
    return cudaGetLastError();
  }
  // the one dtype dispatch of the partial rounds
  DDS_DISPATCH_DTYPE(c.a.dtype, DT, { launch_partial_dt<DT>(c, round, kind, out, s); });
  return cudaGetLastError();
}

template <int DT>
inline void launch_finish_dt(const Call& c, cudaStream_t s) {
  const unsigned grid = (unsigned)c.a.num_rows;
  launch_kernel(s, finish_kernel<DT>, grid, kFinishThreads, 0, c);
}

// The finish: the per-request status bits (when asked), then every row's outputs. Returns the
// launch error.
inline cudaError_t launch_finish(const Call& c, cudaStream_t s) {
  if (c.a.out.request_status) {
    const int blocks = (c.a.num_requests + kSlowThreads - 1) / kSlowThreads;
    launch_kernel(s, shard_status_kernel, (unsigned)blocks, kSlowThreads, 0, c);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  DDS_DISPATCH_DTYPE(c.a.dtype, DT, { launch_finish_dt<DT>(c, s); });  // the finish's one dispatch
  return cudaGetLastError();
}

}  // namespace kshard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_LAUNCH_CUH_
