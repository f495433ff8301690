// The parameter block of a dds_sample launch (SampleParams), the per-block record of the row
// passes (BlockRec), the per-row record of the probabilities pass (RowInfo), shape constants.
#ifndef DDS_KERNELS_SAMPLE_PARAMS_CUH_
#define DDS_KERNELS_SAMPLE_PARAMS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <cfloat>
#include <type_traits>

#include "../common/device.cuh"
#include "../common/dtype.h"
#include "../common/outputs.h"
#include "../common/request.h"
#include "../common/rng.h"
#include "../common/status.h"
#include "../common/warp.cuh"
#include "plan.h"

namespace dds {
namespace ksample {


using namespace kwarp;  // Top2, warp reductions, argmax_merge, approx_gumbel (kernels/common/warp.cuh)

constexpr int kHistBins = 2048;
constexpr int kProbsChunk = 8192;  // columns per CTA of probs_kernel

// Per-block record of the row pass (32 bytes).
struct BlockRec {
  float maxl;    // max of l over the block's finite columns (-inf: none)
  float second;  // second largest l (multiset: equals maxl on a tie)
  int amax;      // first column with l == maxl
  float sa;      // sum exp(a - ma), ma = row::temper(maxl)
  float ea;      // sum exp(a - ma) * (a - ma)
  float sl;      // sum exp(l - maxl)
  float el;      // sum exp(l - maxl) * (l - maxl)
  int pad;
};

// What the probs kernel needs per row.
struct RowInfo {
  double logS;   // log sum exp(x - M) over the support (stats as (x - M) - logS, docs §5)
  float M;       // max x over the support
  int mode;      // 0: softmax(x) over K0; 1: one-hot `token`; 2: filtered prefix; 3: zeros
  int use_a;     // mode 0: x = a (processed) or l (guided)
  float invT;
  int token;
  uint32_t kthr; // mode 2: keep key > kthr || (key == kthr && t <= cid), and a >= amin
  int cid;
  float amin;
  int empty;
};

// Per-row scratch of split_finish_kernel (split_row.cuh), zeroed by row_pass_kernel before it runs.
struct SplitRowCnt {
  unsigned ns;                // entries of S written
  unsigned done;              // the row's CTAs done with their blocks
  unsigned long long zout;    // fixed-point mass of the candidates outside S
};

// Per-row scratch of the split fallback (split_filter.cuh: split_hist_kernel, split_bound_kernel),
// zeroed by row_pass_kernel before they run; filter_kernel finishes the row from it.
struct SplitFiltRow {
  uint32_t cnt[kHistBins];             // the first digit's histogram: counts
  unsigned long long mass[kHistBins];  //   and fixed-point masses (kMassScale)
  unsigned done;                       // histogram CTAs done
  int ok;                              // the split took the row (its last histogram CTA)
  uint32_t bd;                         // the boundary digit (key bits 31..21)
  int eqn, above_cnt;                  // columns in it, above it
  unsigned long long above_mass;       // fixed-point mass above it
  double target;                       // p x the row's fixed-point mass
  float Ml;                            // the row maximum of l (the block records)
  unsigned nlist;                      // the digit's columns listed (boundary pass)
  unsigned long long zf;               // kept columns above the digit: sums in 2^40 fixed point
  long long ef;
  int nk;
};
// (row_pass_kernel zeroes both as 32-bit words: zero_finish_state)
static_assert(sizeof(SplitRowCnt) % sizeof(unsigned) == 0, "SplitRowCnt: whole words");
static_assert(sizeof(SplitFiltRow) % sizeof(unsigned) == 0, "SplitFiltRow: whole words");
static_assert((long long)kSplitMaxRows * sizeof(SplitFiltRow) / sizeof(unsigned) < (1LL << 31),
              "SplitFiltRow words of kSplitMaxRows rows: an int");

struct SampleParams {
  int V, nblocks, num_rows, num_requests;
  const int32_t* row_offsets;
  const int32_t* positions;
  const void* logits;
  long long row_stride;
  const void* uncond;
  long long uncond_stride;
  int uncond_num_rows;
  const int32_t* uncond_row_offsets;
  rule::Values vals;  // the requests' sampling values (kernels/common/request.h)
  int banned;
  // Allowed-token masks (kernels/common/allowed.h): request r's row at allowed + r * allowed_stride
  // (int32 words); null: every column allowed.
  const int32_t* allowed;
  long long allowed_stride;
  int stats_guided;
  int want_stats;
  RowOutputs out;  // tokens .. request_status (kernels/common/outputs.h)
  int vec_ok;
  int smem_row;  // filter kernel: row held in shared memory
  int bpw;    // plain pass: consecutive blocks of one row per warp (launch_sample_dt)
  int fbpw;   // filtered pass (row_pass_kernel, 16-bit dtypes): consecutive blocks per warp
  // plain pass: the row's last warp finishes it (finish_plain_warp) instead of a finish kernel;
  // with several warps per row, counters[row] (zeroed on the stream before the launch) counts
  // the warps done.
  int fuse_finish;
  int direct_filter;  // filtered rows: filter_kernel, a CTA per row (no candidate lists)
  int pass_top2;      // row_pass_kernel records each block's first argmax and runner-up
  int cf_wpc;         // cand_finish_kernel: warps (rows) per CTA, 1..kRowWarps (0: cand_finish_wpc)
  int small_plain;    // unfiltered rows of V <= 2048: small_plain_kernel (no pass + finish)
  int small_exact_all;  // tests: small_plain_kernel scores every column exactly (its rare path)
  int small_cta;      // small_plain_kernel with a CTA per row (small_cta_default)
  int small_filter;   // filtered rows of V <= 2048: small_filter_kernel (no lists, no fallback)
  int small_filter_cta;  // small_filter_kernel with a CTA per row (small_filter_cta_default)
  int* counters;
  BlockRec* recs;
  RowInfo* rowinfo;
  // Candidates from the streaming pass: per (row, block) a list of cand_cap
  // entries {column, l bits}; per (row, block) kept masses; rows left to the filter kernel.
  int2* cand;
  int cand_cap;   // entries per block list (power of two)
  int cand_lvl0;  // first threshold level (-1: every finite column)
  unsigned long long* kmass;
  int* fb_rows;
  int* fb_count;
  unsigned* fb_done;
  // split_finish_kernel (plan.split_finish, at most kSplitMaxRows rows): per row its counters
  // and its candidate set S (nblocks x cand_cap entries).
  SplitRowCnt* split_cnt;
  int2* split_s;
  // The split fallback (plan.split_filter, rows of V > kSplitFiltMinV, at most kSplitMaxRows rows):
  // its CTAs per row and columns per CTA, per row its scratch and its list (kBigListCap ids, then
  // their l values).
  int split_filter;
  int sf_ctas, sf_cols;
  // row_pass_kernel zeroes the fallback list's counters and, with split_finish / split_filter,
  // the per-row records of those kernels (plan.zero_fallback: the row pass comes first)
  int pass_zeroes;
  int split_finish;
  int split_rank;  // split_finish_kernel: top-k by ranks when |S| <= this (plan.split_rank)
  int split_smem;  // split_finish_kernel: S in shared memory when |S| <= this (plan.split_smem)
  SplitFiltRow* sf_rows;
  int* sf_list;
  // plan.split_overlap: split_bound_kernel and filter_kernel start while the split finish's rows
  // that settle still run (programmatic dependent launch); they wait until ovl[0] counts the
  // ovl_n[0] CTAs of split_finish_hist_kernel, ovl[1] the ovl_n[1] of split_bound_kernel
  // (both zeroed by row_pass_kernel).
  int overlap;
  unsigned* ovl;
  unsigned ovl_n[2];
};

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_PARAMS_CUH_
