// dds_sample on CUDA: framework-free kernel templates plus one host launcher (launch_sample).
// Semantics: docs/sampling.md (the CPU backend is the oracle). Random numbers: kernels/rng.h.
//
// Kernel shapes
//  * plain_pass_kernel (unfiltered rows): each warp streams up to 16 consecutive 1024-token
//    blocks of one row (launch_sample_dt picks 16, 8, .. 1 so that >= 2048 warps remain), 32
//    values per lane in registers (bf16/f16 kept packed), the next block's 16-byte loads issued
//    before this block's arithmetic. Per block: the maximum with NaN propagation (a NaN or +inf
//    only then triggers the sanitising rule of docs/sampling.md §2, in place), one exp pass for
//    the sums; a 32-byte record per block. No counters, fences or argmax work in the stream.
//  * plain_finish_kernel (one CTA per row, < 1024 rows) / plain_finish_warp_kernel (one warp per
//    row): merges the block records, re-reads the block holding the row maximum for its first
//    column and the runner-up, picks the winning block (block scores in fp32 first, float64
//    Gumbels for those near the best), re-reads that block (L2) for the token Gumbels, writes the
//    outputs. From 1024 rows, rows that one warp streams whole (nblocks <= bpw) are finished by
//    that warp inside the pass instead (plain_pass_kernel<DT, true>, P.fuse_finish).
//  * small_plain_kernel (unfiltered rows, V <= 2048, P.small_plain): one warp per row holds the
//    whole row in registers (block 0's 1024 values, the last block's), does the pass and the
//    finish in one launch with the same arithmetic (same output bits), nothing written between;
//    up to 2 x SMs rows, a CTA per row whose 8 warps share the token pass (P.small_cta).
//  * row_pass_kernel (filtered rows; launched only when filters may be on): one
//    warp per block (f32) or per up to 4 consecutive blocks of a row (16-bit, P.fbpw); it writes
//    each block's record (maximum, sums) and candidate list (columns at or above a threshold
//    from the lane maxima). Then cand_finish_kernel, one warp per row, bounds the kept values
//    from the records, selects top-k / top-p / min-p on the merged lists when they provably hold
//    the kept set (see finish_filtered), else hands the row to filter_kernel. (P.direct_filter, off by default:
//    no lists, filter_kernel takes every filtered row.)
//  * filter_kernel: one 1024-thread CTA per row with top-k / top-p / min-p (with the candidate
//    lists: only the rows they could not settle, a grid-stride loop). The row is held in
//    shared memory as fp32 when it fits, else re-read (L2 / HBM) per pass. Thresholds are found by
//    radix select over order-preserving keys (3 digit passes, 11/11/10 bits) with counts (top-k)
//    or 64-bit fixed-point masses (top-p); ties at the boundary are resolved by a radix select on
//    token ids. The kept set is always a prefix of the order (a desc, t asc), so it is described
//    by (key threshold, last id at that key, min-p value threshold).
//  * probs_kernel: writes the probability rows once the row's max and log-sum are known (second read).
//  * status_kernel: per-request DDS_REQ_* bits (sanitisation flags | EMPTY_ROW of any row).
#ifndef DDS_KERNELS_SAMPLE_SAMPLE_CUH_
#define DDS_KERNELS_SAMPLE_SAMPLE_CUH_

#include "launch.cuh"

#endif  // DDS_KERNELS_SAMPLE_SAMPLE_CUH_
