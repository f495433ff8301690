// dds_sample on CUDA: framework-free kernel templates and their host launcher. Semantics:
// docs/sampling.md (the CPU backend is the oracle); random numbers: kernels/common/rng.h; design
// and figures: docs/cuda_sample.md. Which kernels a call runs, and in which shape, is decided in
// one place, plan_sample (plan.h); launch.cuh queues them in stream order.
//
// Files, in include order
//   plan.h          the launch plan: shape constants, the rules, SamplePlanOverrides (tests)
//   params.cuh      SampleParams (the kernels' parameter block), BlockRec, RowInfo
//   row.cuh         row access: Req (row_req: find_request + load_req over common/request.h),
//                   block loads of l (common/row.h: Elt, row::make_l, row::temper), ban_block
//   outputs.cuh     per-row output stores and statistics (row_stats, write_row)
//   select.cuh      the teams (WarpTeam, CtaTeam) and their reductions, radix selects over
//                   candidate sources, team_token (the token search of every finish)
//   filtered.cuh    row_pass_kernel, cand_finish_kernel (filtered rows from candidate lists)
//   plain_finish.cuh plain_finish_row over a team: plain_finish_kernel (CTA), plain_finish_warp_kernel
//   plain_pass.cuh  plain_pass_kernel (unfiltered rows' streaming pass, optionally finishing)
//   small.cuh       small_plain_kernel, small_filter_kernel (V <= 2048, one launch)
//   filter_select.cuh filter_kernel's shared memory, row and list sources, radix_pick and the CTA
//                   radix select, CTA reductions
//   filter_cta.cuh  filter_kernel (the rows the lists cannot settle: a CTA per row)
//   split_row.cuh   split_finish_kernel (cand_finish_kernel's outputs, several CTAs per row)
//   split_filter.cuh split_hist_kernel, split_bound_kernel (filter_kernel's first stages on wide
//                   top-p rows, several CTAs per row), split_finish_hist_kernel (the split finish
//                   and split_hist_kernel's work in one launch)
//   probs.cuh       probs_kernel, status_kernel
//   launch.cuh      workspace layout, launch_sample (the one dtype dispatch, DDS_DISPATCH_DTYPE)
//
// Kernels
//  * plain_pass_kernel (unfiltered rows): each warp streams up to 16 consecutive 1024-token
//    blocks of one row (plan.bpw), 32 values per lane in registers (bf16/f16 kept packed), the
//    next block's 16-byte loads issued before this block's arithmetic. Per block: the maximum with
//    NaN propagation (a NaN or +inf only then triggers the sanitising rule of docs/sampling.md §2,
//    in place), one exp pass for the sums; a 32-byte record per block.
//  * plain_finish_kernel (one CTA per row, < 1024 rows) / plain_finish_warp_kernel (one warp per
//    row), one algorithm (plain_finish_row) over the two teams: merges the block records, re-reads the block holding the row maximum for its first
//    column and the runner-up, picks the winning block (block scores in fp32 first, float64
//    Gumbels for those near the best), re-reads that block (L2) for the token Gumbels, writes the
//    outputs. From 1024 rows, rows that one warp streams whole are finished by that warp inside
//    the pass instead (plain_pass_kernel<DT, true, MASK>, plan.fuse_finish). MASK (the plain
//    pass, the small kernels, filter_kernel): the launch has allowed-token masks; without, the
//    kernel's code is that of a build without masks.
//  * small_plain_kernel (unfiltered rows, V <= 2048): one warp per row holds the whole row in
//    registers, does the pass and the finish in one launch with the same arithmetic (same output
//    bits); up to 2 x SMs rows, a CTA per row whose 8 warps share the token pass.
//  * row_pass_kernel (filtered rows): one warp per block (f32) or per up to 4 consecutive blocks
//    (16-bit, plan.fbpw); it writes each block's record and candidate list (columns at or above a
//    threshold from the lane maxima). Then cand_finish_kernel, one warp per row, bounds the kept
//    values from the records, selects top-k / top-p / min-p on the merged lists when they provably
//    hold the kept set (finish_filtered), else hands the row to filter_kernel.
//  * split_finish_kernel (filtered rows of batches that leave SMs idle, plan.split_finish): in
//    place of cand_finish_kernel, a CTA per 8 block lists of a row compacts its candidates into
//    the row's set S; the row's last CTA selects, sums and samples on S with 8 warps (CtaTeam).
//    Same decisions, integer sums and token as cand_finish_kernel: the same bits.
//  * small_filter_kernel (filtered rows, V <= 2048): the row's complete list in registers / shared
//    memory, finish_filtered's decisions in one launch.
//  * split_hist_kernel, split_bound_kernel (the fallback rows' wide top-p nuclei, V > 40960, in
//    batches that leave SMs idle, plan.split_filter): a CTA per 2048-8192 columns of a row
//    builds the top-p select's first-digit histogram (integer atomics into the row's; its last
//    CTA picks the boundary digit), then its share of the boundary pass (fixed-point sums above
//    the digit, the digit's columns listed); filter_kernel finishes the row on that list: the
//    same bits. With few rows (plan.split_spec) the histograms run beside the split finish, in
//    its launch (split_finish_hist_kernel), for every row the fallback may take.
//  * filter_kernel: one 1024-thread CTA per row left by the lists (a grid-stride loop). The row is
//    held in shared memory as fp32 when it fits, else re-read per pass. Thresholds by radix select
//    over order-preserving keys (11/11/10-bit digits) with counts (top-k) or 64-bit fixed-point
//    masses (top-p); boundary ties by a radix select on token ids. The kept set is a prefix of the
//    order (a desc, t asc): (key threshold, last id at that key, min-p value threshold).
//    SPLIT (plan.split_filter): the launch follows the split fallback and resumes its rows from
//    its state; without, that path is not compiled in.
//  * probs_kernel: the probability rows once each row's max and log-sum are known (second read).
//  * status_kernel: per-request DDS_REQ_* bits (sanitisation flags | EMPTY_ROW of any row).
#ifndef DDS_KERNELS_SAMPLE_SAMPLE_CUH_
#define DDS_KERNELS_SAMPLE_SAMPLE_CUH_

#include "launch.cuh"

#endif  // DDS_KERNELS_SAMPLE_SAMPLE_CUH_
