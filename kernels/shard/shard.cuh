// Vocabulary-parallel sampling (include/dds/dds_shard.h, docs/vocab_parallel.md): each of R ranks
// holds a slice of the vocabulary, writes a small record per row and round, and every rank finishes
// every row from the all-gathered records.
//
// This header is the host/device logic that the CPU reference (src/shard.cpp) runs and the CUDA
// kernels share: framework-free and allocation-free, a row processed by one caller (a host loop
// iteration or one device thread), columns in increasing id order, so that both backends compute
// the same sums in the same order.
//  * records.h     the protocol: constants, record layouts (StatsHead + Cand, RadixRec, KeptRec)
//  * row.h         float64 helpers, per-request parameters (kernels/common/request.h), the call
//                  (Args, Call), a row's columns (kernels/common/row.h's transform), the column
//                  rule (KRule), a rank's sampler share, round 0 of a row
//  * rule.h        global statistics, candidate merge, radix walk, the filtered set (k_rule),
//                  rounds RADIX and KEPT of a row
//  * finish_row.h  the finish of a row
//
// The CUDA kernels (launch.cuh queues them; src/cuda_shard.cu is the backend's glue). One CTA
// (8 warps) per row and round: the per-row decisions (rank order, global statistics, filtered-set
// rule, radix walk, finish) are the logic above run by thread 0 on records pre-summed into shared
// memory; everything that touches the slice is spread over the CTA.
//  * stats_kernel (stats.cuh), round 0 (STATS): one warp per 1024-id block part of the slice (32
//    values per lane in registers, 16-byte loads for blocks lying wholly in the slice when
//    aligned), block max / multiset second / first argmax by shuffles, fp32 exp sums relative to
//    the block max (ex2), one 32-byte record per block in shared memory (block.cuh); then warp 0
//    merges the blocks in order in float64 (sums rescaled to the rank's max), scores the full
//    blocks (float64 Gumbels), and warps 0-2 compute the token winners of the best full block and
//    of the cut blocks (approximate fp32 Gumbels, exact float64 ones for the few within the
//    margin). The second-ranked ids of the top-2 are found by a short ordered re-scan of the one
//    or two blocks that can hold them. Top-k candidates: a 4 x 8-bit radix select of the candidate
//    threshold over the slice (re-read), an ordered collection (ties by lower id) and a bitonic
//    sort in shared memory.
//  * kept_kernel (rounds.cuh), round KEPT: the same block pass over the filtered set, sums
//    rescaled to the global max.
//  * radix_kernel (rounds.cuh), rounds RADIX: a 256-bin histogram in shared memory (integer
//    counts; masses exp(a - M) in float64 accumulated as 64-bit fixed point, so the atomics are
//    order-independent and the record is deterministic).
//  * slow_partial_kernel (rounds.cuh): every partial round, one thread per row running the logic
//    above as the CPU does, for slices touching more than kMaxBlocks blocks.
//  * finish_kernel (finish.cuh): one warp per row; thread 0 finishes the row (records only); the
//    warp writes the probabilities of the slice. shard_status_kernel: the per-request status bits.
// No allocation, no host synchronisation, no workspace: graph-safe. The fp32 block sums make the
// records equal to the CPU's up to rounding (block scores, statistics within ~1e-7 relative);
// tokens differ only at counted near-ties, as for dds_sample's GPU path.
#ifndef DDS_KERNELS_SHARD_SHARD_CUH_
#define DDS_KERNELS_SHARD_SHARD_CUH_

#include "finish_row.h"

#endif  // DDS_KERNELS_SHARD_SHARD_CUH_
