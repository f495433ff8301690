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
//  * row_pass_kernel (filtered rows, kUseCandidates; launched only when filters may be on): one
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
#ifndef DDS_KERNELS_SAMPLE_CUH_
#define DDS_KERNELS_SAMPLE_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <cfloat>
#include <type_traits>

#include "dtype.h"
#include "rng.h"
#include "warp.cuh"

namespace dds {
namespace ksample {

using namespace kwarp;  // Top2, warp reductions, argmax_merge, approx_gumbel (kernels/warp.cuh)

constexpr int kB = kBlockSize;  // 1024
constexpr int kRowWarps = 8;    // warps per CTA of row_pass_kernel
constexpr int kFilterThreads = 1024;
constexpr int kHistBins = 2048;
constexpr int kSmemRowMax = 40960;
constexpr int kProbsChunk = 8192;  // columns per CTA of probs_kernel  // filter rows up to this many columns live in shared memory

// Per-block record of the row pass (32 bytes).
struct BlockRec {
  float maxl;    // max of l over the block's finite columns (-inf: none)
  float second;  // second largest l (multiset: equals maxl on a tie)
  int amax;      // first column with l == maxl
  float sa;      // sum exp(a - ma), ma = xform(maxl)
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
  const float* gs;
  float g;
  const float* temps;
  float temp;
  const int32_t* ks;
  int k;
  const float* ps;
  float p;
  const float* minps;
  float minp;
  const uint64_t* seeds;
  uint64_t seed;
  const uint32_t* steps;
  uint32_t step;
  int banned;
  int stats_guided;
  int want_stats;
  int32_t* tokens;
  float* logprobs;
  int32_t* argmax;
  float* confidence;
  float* margin;
  float* entropy;
  void* probs;
  int probs_dtype;
  long long probs_stride;
  int32_t* request_status;
  int vec_ok;
  int smem_row;  // filter kernel: row held in shared memory
  int bpw;    // plain pass: consecutive blocks of one row per warp (launch_sample_dt)
  int fbpw;   // filtered pass (row_pass_kernel, 16-bit dtypes): consecutive blocks per warp
  // plain pass: the row's last warp finishes it (finish_plain_warp) instead of a finish kernel;
  // with several warps per row, counters[row] (zeroed on the stream before the launch) counts
  // the warps done.
  int fuse_finish;
  int block_approx;  // finish_plain_warp: block scores pre-selected in fp32
  int direct_filter;  // filtered rows: filter_kernel, a CTA per row (no candidate lists)
  int pass_top2;      // row_pass_kernel records each block's first argmax and runner-up
  int cf_wpc;         // cand_finish_kernel: warps (rows) per CTA, 1..kRowWarps (0: cand_finish_wpc)
  int small_plain;    // unfiltered rows of V <= 2048: small_plain_kernel (no pass + finish)
  int small_exact_all;  // tests: small_plain_kernel scores every column exactly (its rare path)
  int small_cta;      // small_plain_kernel with a CTA per row (small_cta_default)
  int small_filter;   // filtered rows of V <= 2048: small_filter_kernel (no lists, no fallback)
  int small_filter_cta;  // small_filter_kernel with a CTA per row (small_filter_cta_default)
  int pdl;               // launch_sample_dt: programmatic dependent launch between the kernels
  int* counters;
  BlockRec* recs;
  RowInfo* rowinfo;
  // Candidates from the streaming pass (kUseCandidates): per (row, block) a list of cand_cap
  // entries {column, l bits}; per (row, block) kept masses; rows left to the filter kernel.
  int2* cand;
  int cand_cap;   // entries per block list (power of two)
  int cand_lvl0;  // first threshold level (-1: every finite column)
  unsigned long long* kmass;
  int* fb_rows;
  int* fb_count;
  unsigned* fb_done;
};

// ------------------------------------------------------------------------------------------------
// Element access
template <int DT>
struct Elt;
template <>
struct Elt<0> {
  using T = float;
  static constexpr int VEC = 4;
  static __device__ __forceinline__ float cvt(float x) { return x; }
};
template <>
struct Elt<1> {
  using T = uint16_t;
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float cvt(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
};
template <>
struct Elt<2> {
  using T = uint16_t;
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float cvt(uint16_t h) { return __half2float(__ushort_as_half(h)); }
};

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Programmatic dependent launch (sm_90; launch_sample_dt): every kernel of a dds_sample call but
// the first is launched with programmatic stream serialization, so its CTAs may be scheduled once
// every CTA of the previous kernel runs; each kernel first waits for the previous one to complete
// (griddepcontrol.wait: all its memory operations visible), then lets the next one be scheduled.
// The same order of effects as plain stream order; what it saves is the launch gap between two
// kernels. No-ops without the launch attribute, and in the host emulation.
__device__ __forceinline__ void pdl_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Per-request parameters after docs/sampling.md §1.
struct Req {
  int row_begin, row_end;
  bool guided;
  long long ufirst;
  float g;
  bool greedy;
  float invT;
  int k;
  float p;
  float minp;
  uint64_t seed;
  uint32_t step;
  int status;
};

__device__ __forceinline__ int find_request(const SampleParams& P, int row) {
  if (!P.row_offsets) return row;
  int lo = 0, hi = P.num_requests;  // last r in [0, n) with offs[r] <= row
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (__ldg(P.row_offsets + mid) <= row) lo = mid;
    else hi = mid;
  }
  return lo;
}

__device__ __forceinline__ Req load_req(const SampleParams& P, int r) {
  Req q;
  q.status = 0;
  q.row_begin = P.row_offsets ? __ldg(P.row_offsets + r) : r;
  q.row_end = P.row_offsets ? __ldg(P.row_offsets + r + 1) : r + 1;
  float T = P.temps ? __ldg(P.temps + r) : P.temp;
  if (isnan(T) || T < 0.f || isinf(T)) {
    T = 1.f;
    q.status |= 1;  // DDS_REQ_BAD_TEMPERATURE
  }
  q.greedy = false;
  q.invT = 1.f;
  if (T == 0.f) {
    q.greedy = true;
  } else {
    q.invT = __fdiv_rn(1.0f, T);
    if (isinf(q.invT)) q.greedy = true;
  }
  float g = P.gs ? __ldg(P.gs + r) : P.g;
  if (!isfinite(g)) {
    g = 0.f;
    q.status |= 2;  // DDS_REQ_BAD_GUIDANCE
  }
  q.g = g;
  q.guided = false;
  q.ufirst = 0;
  // A request whose own device row range is inconsistent is never guided (flagged below).
  const bool rows_ok = q.row_begin >= 0 && q.row_end >= q.row_begin && q.row_end <= P.num_rows;
  if (P.uncond != nullptr && g != 0.f) {
    long long first = P.uncond_row_offsets ? (long long)__ldg(P.uncond_row_offsets + r)
                                           : (long long)q.row_begin;
    if (P.uncond_row_offsets == nullptr || first >= 0) {
      if (!rows_ok || first < 0 || first + (q.row_end - q.row_begin) > P.uncond_num_rows) {
        q.status |= 32;  // DDS_REQ_BAD_UNCOND_ROWS
      } else {
        q.guided = true;
        q.ufirst = first;
      }
    }
  }
  int k = P.ks ? __ldg(P.ks + r) : P.k;
  if (k < 0) {
    k = 0;
    q.status |= 4;
  }
  q.k = k;
  float p = P.ps ? __ldg(P.ps + r) : P.p;
  if (isnan(p)) {
    p = 1.f;
    q.status |= 8;
  }
  q.p = p;
  float mp = P.minps ? __ldg(P.minps + r) : P.minp;
  if (isnan(mp) || mp < 0.f) {
    mp = 0.f;
    q.status |= 16;
  }
  if (mp > 1.f) mp = 1.f;
  q.minp = mp;
  q.seed = P.seeds ? __ldg(P.seeds + r) : P.seed;
  q.step = P.steps ? __ldg(P.steps + r) : P.step;
  return q;
}

__device__ __forceinline__ bool is_filtered(const Req& q, int V) {
  return !q.greedy && ((q.k > 0 && q.k < V) || q.p < 1.f || q.minp > 0.f);
}

// §2: l from c (and u).
__device__ __forceinline__ float make_l(float c, float u, bool guided, float g, int t, int banned) {
  float v = c;
  if (guided) v = (c == neg_inf() || u == neg_inf()) ? neg_inf() : __fmaf_rn(g, __fsub_rn(c, u), c);
  if (t == banned) v = neg_inf();
  if (isnan(v)) v = neg_inf();
  if (v == -neg_inf()) v = FLT_MAX;
  return v;
}
// §2 step 3: a = l * invT, +inf -> FLT_MAX.
// A finite l whose product overflows to -inf stays in K0 as -FLT_MAX (docs §2 step 3).
__device__ __forceinline__ float xform(float l, float invT) {
  float a = fminf(__fmul_rn(l, invT), FLT_MAX);
  if (a == neg_inf() && l != neg_inf()) a = -FLT_MAX;
  return a;
}

// §2 without the banned-token rule (the row pass patches that one column separately):
// NaN -> -inf, +inf -> FLT_MAX in three instructions.
__device__ __forceinline__ float sanitize_fast(float v) {
  return (v == v) ? fminf(v, FLT_MAX) : neg_inf();
}
__device__ __forceinline__ float make_l_nb(float c, float u, bool guided, float g) {
  float v = c;
  if (guided) v = (c == neg_inf() || u == neg_inf()) ? neg_inf() : __fmaf_rn(g, __fsub_rn(c, u), c);
  return sanitize_fast(v);
}
// max that propagates NaN (sm_80+): the row pass's fast path detects NaN and +inf through it.
__device__ __forceinline__ float fmax_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  return (a != a || b != b) ? __int_as_float(0x7fffffff) : fmaxf(a, b);
#endif
}
// Pairwise max of two packed bf16x2 (DT 1) / f16x2 (DT 2) words, NaN-propagating (sm_80+).
template <int DT>
__device__ __forceinline__ uint32_t pmax_nan(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t d;
  if (DT == 1) asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const float a0 = Elt<DT>::cvt((uint16_t)(a & 0xffffu)), b0 = Elt<DT>::cvt((uint16_t)(b & 0xffffu));
  const float a1 = Elt<DT>::cvt((uint16_t)(a >> 16)), b1 = Elt<DT>::cvt((uint16_t)(b >> 16));
  const uint32_t lo = (a0 != a0 || b0 != b0 || a0 >= b0) ? (a & 0xffffu) : (b & 0xffffu);
  const uint32_t hi = (a1 != a1 || b1 != b1 || a1 >= b1) ? (a >> 16) : (b >> 16);
  return lo | (hi << 16);
#endif
}
// 2^x (MUFU.EX2, flushes results below 2^-126 to 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Loads the VEC values of columns [c0, c0 + VEC) of a row; columns >= V read as -inf.
template <int DT>
__device__ __forceinline__ void load_vec(const typename Elt<DT>::T* rowp, int c0, int V, bool vec,
                                         float* out) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  if (vec && c0 + VEC <= V) {
    const uint4 raw = *reinterpret_cast<const uint4*>(rowp + c0);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int q = 0; q < VEC; ++q) out[q] = Elt<DT>::cvt(e[q]);
  } else {
#pragma unroll
    for (int q = 0; q < VEC; ++q) out[q] = (c0 + q < V) ? Elt<DT>::cvt(rowp[c0 + q]) : neg_inf();
  }
}

// The 1024 l values of block `blk` of `row` for one warp: lane holds columns
// blk*1024 + j*32*VEC + lane*VEC + q at lv[j*VEC + q].
// SAN = false (the row pass's fast path): whole 16-byte-aligned blocks skip the NaN -> -inf and
// +inf -> FLT_MAX rule; the caller detects both through a NaN-propagating maximum and reloads.
template <int DT, bool SAN = true>
__device__ __forceinline__ void load_block_l(const SampleParams& P, const Req& q, int row, int blk,
                                             int lane, float (&lv)[32]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const T* urow = nullptr;
  if (q.guided)
    urow = reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride;
  const bool vec = P.vec_ok != 0;
  if (vec && (blk + 1) * kB <= P.V) {
    // Whole block inside the row, 16-byte aligned: issue every load before any use.
    uint4 cr[NJ];
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      cr[j] = *reinterpret_cast<const uint4*>(crow + blk * kB + j * 32 * VEC + lane * VEC);
    if (q.guided) {
      // u in groups of at most 4 loads (16 registers), combined into l as they arrive, so that a
      // float block (8 + 8 loads) does not hold both tensors in registers at once.
      constexpr int UG = NJ < 4 ? NJ : 4;
#pragma unroll
      for (int j0 = 0; j0 < NJ; j0 += UG) {
        uint4 ur[UG];
#pragma unroll
        for (int jj = 0; jj < UG; ++jj)
          ur[jj] = *reinterpret_cast<const uint4*>(urow + blk * kB + (j0 + jj) * 32 * VEC + lane * VEC);
#pragma unroll
        for (int jj = 0; jj < UG; ++jj) {
          const int j = j0 + jj;
          const T* ce = reinterpret_cast<const T*>(&cr[j]);
          const T* ue = reinterpret_cast<const T*>(&ur[jj]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float c = Elt<DT>::cvt(ce[e]), u = Elt<DT>::cvt(ue[e]);
            lv[j * VEC + e] = SAN ? make_l_nb(c, u, true, q.g)
                                  : ((c == neg_inf() || u == neg_inf()) ? neg_inf()
                                                                        : __fmaf_rn(q.g, __fsub_rn(c, u), c));
          }
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const T* ce = reinterpret_cast<const T*>(&cr[j]);
        const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float c = Elt<DT>::cvt(ce[e]);
          lv[j * VEC + e] = SAN ? sanitize_fast(c) : c;
        }
        (void)c0;
      }
    }
    // The banned column, if it lies in this block: one lane patches it (unrolled, no local memory).
    const int bo = P.banned - blk * kB;
    if (bo >= 0 && bo < kB && ((bo / VEC) & 31) == lane) {
      const int idx = (bo / (32 * VEC)) * VEC + (bo % VEC);
#pragma unroll
      for (int e = 0; e < 32; ++e)
        if (e == idx) lv[e] = neg_inf();
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
    float c[VEC];
    load_vec<DT>(crow, c0, P.V, vec, c);
    if (q.guided) {
      float u[VEC];
      load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = make_l(c[e], u[e], true, q.g, c0 + e, P.banned);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = make_l(c[e], 0.f, false, 0.f, c0 + e, P.banned);
    }
  }
}

// One column's l (scalar load), for re-reads of a few columns.
template <int DT>
__device__ __forceinline__ float load_l(const SampleParams& P, const Req& q, int row, int col) {
  using T = typename Elt<DT>::T;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const float c = Elt<DT>::cvt(crow[col]);
  float u = 0.f;
  if (q.guided)
    u = Elt<DT>::cvt(reinterpret_cast<const T*>(P.uncond)[(q.ufirst + (row - q.row_begin)) * P.uncond_stride + col]);
  return make_l(c, u, q.guided, q.g, col, P.banned);
}


template <int DT>
__device__ __forceinline__ int col_of(int blk, int lane, int i) {
  constexpr int VEC = Elt<DT>::VEC;
  return blk * kB + (i / VEC) * 32 * VEC + lane * VEC + (i % VEC);
}

// ------------------------------------------------------------------------------------------------
// Reductions
__device__ __forceinline__ float warp_max_nan(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float fexp(float d) { return exp2f(d * 1.4426950408889634f); }

// ------------------------------------------------------------------------------------------------
// Output helpers
__device__ __forceinline__ void store_prob(void* base, int dt, long long idx, float v) {
  if (dt == 0) reinterpret_cast<float*>(base)[idx] = v;
  else if (dt == 1) reinterpret_cast<uint16_t*>(base)[idx] = f32_to_bf16(v);
  else reinterpret_cast<uint16_t*>(base)[idx] = f32_to_f16(v);
}

__device__ __forceinline__ void write_empty(const SampleParams& P, int row) {
  if (P.tokens) P.tokens[row] = 0;
  if (P.argmax) P.argmax[row] = 0;
  if (P.logprobs) P.logprobs[row] = neg_inf();
  if (P.confidence) P.confidence[row] = 0.f;
  if (P.margin) P.margin[row] = 0.f;
  if (P.entropy) P.entropy[row] = 0.f;
  RowInfo ri;
  ri.logS = 0;
  ri.M = 0.f;
  ri.mode = 3;
  ri.use_a = 0;
  ri.invT = 1.f;
  ri.token = 0;
  ri.kthr = 0;
  ri.cid = 0;
  ri.amin = 0;
  ri.empty = 1;
  P.rowinfo[row] = ri;
}

__device__ __forceinline__ void write_outputs(const SampleParams& P, int row, int token, int amax,
                                              double logprob, double conf, double margin,
                                              double ent) {
  if (P.tokens) P.tokens[row] = token;
  if (P.argmax) P.argmax[row] = amax;
  if (P.logprobs) P.logprobs[row] = (float)logprob;
  if (P.confidence) P.confidence[row] = (float)conf;
  if (P.margin) P.margin[row] = (float)margin;
  if (P.entropy) P.entropy[row] = (float)ent;
}



// ------------------------------------------------------------------------------------------------
// Filtered rows from candidates of the streaming pass (kUseCandidates).
//
// Every warp of a filtered row writes, besides its block record, a list of the block's columns
// with l >= tau (tau: the smallest of the per-group maxima of l over groups of 2^lvl lanes, so at
// least 32 / 2^lvl lanes contribute; raised level by level when the list would overflow) and
// records tau in BlockRec::ea (every finite column of the block outside the list has l < tau),
// the list length in BlockRec::pad and, for top-p rows without top-k, the sum of exp(a - ma) over
// the columns outside the list in BlockRec::sa. The last warp of the row merges the lists: with
// U = max tau, the candidates with a > xform(prev(U)) are exactly a prefix S of the order
// (a desc, t asc). When the kept set is provably inside S (top-k with k <= |S|, top-p whose
// boundary lies in S, min-p threshold above U, or S = every finite column), the warp selects the
// thresholds on S (radix select, 8-bit digits), samples and writes every output; otherwise it
// appends the row to the fallback list that filter_kernel then processes exactly.
__device__ __forceinline__ uint32_t fkey(float a) {
  const uint32_t u = __float_as_uint(a);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float fkey_inv(uint32_t K) {
  return __uint_as_float((K & 0x80000000u) ? (K & 0x7fffffffu) : ~K);
}
constexpr double kMassScale = 17592186044416.0;  // 2^44: fixed-point masses (e <= 1)
// Compile-time switch: -DDDS_SAMPLE_CANDIDATES=0 sends every filtered row to filter_kernel (the
// previous path, one CTA per row) instead of the candidates of the row pass.
#ifndef DDS_SAMPLE_CANDIDATES
#define DDS_SAMPLE_CANDIDATES 1
#endif
constexpr bool kUseCandidates = DDS_SAMPLE_CANDIDATES != 0;
// Candidates: cand_finish_kernel finishes each row, one warp per row, after the pass.
constexpr int kWBins = 256;

// The smallest float x with exp((double)x - md) >= minp (docs §3 min-p as a value threshold).
__device__ __forceinline__ float minp_threshold(float m, double md, float minp) {
  const double lm = log((double)minp);
  float x = (float)(md + lm);
  if (x > m) x = m;
  int it = 0;
  while (it++ < 64 && !(exp((double)x - md) >= (double)minp)) x = nextafterf(x, FLT_MAX);
  it = 0;
  while (it++ < 64) {
    const float y = nextafterf(x, -FLT_MAX);
    if (exp((double)y - md) >= (double)minp) x = y;
    else break;
  }
  return x;
}

// f(c, l) for the entries S[j] this lane owns (j = lane mod 32), four loads in flight; j0 /
// step: a CTA's warps share the list (warp w: j0 = 128 w + lane, step 128 x warps).
template <typename F>
__device__ __forceinline__ void for_list(const int2* S, int nS, int lane, F f, int j0 = -1,
                                         int step = 128) {
  for (j0 = j0 < 0 ? lane : j0; j0 < nS; j0 += step) {
    int2 e[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      e[u] = (j0 + 32 * u < nS) ? __ldcg(S + j0 + 32 * u) : make_int2(-1, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (j0 + 32 * u < nS) f(e[u].x, __int_as_float(e[u].y));
  }
}

// Fixed-point masses of histogram bins (select_src, radix_select) are kept as two 32-bit words
// per bin, the low word's wrap-arounds carried into the high word by the thread whose add
// wrapped (the atomic's return value tells it): a 64-bit atomic add on shared memory is a
// compare-and-swap loop (ATOMS.CAST.SPIN.64 on sm_90), and on flat rows, where most columns fall
// into a few bins, those loops dominated (flat top-p at 4096 x 262144 ran at 37x / 81x the
// one-read time). The sum is the same integer (< 2^64 as before).
__device__ __forceinline__ void mass_add(uint32_t* mlo, uint32_t* mhi, uint32_t bin,
                                         unsigned long long m) {
  const uint32_t lo = (uint32_t)m, hi = (uint32_t)(m >> 32);
  const uint32_t old = atomicAdd(&mlo[bin], lo);
  const uint32_t c = hi + ((uint32_t)(old + lo) < old ? 1u : 0u);
  if (c) atomicAdd(&mhi[bin], c);
}
__device__ __forceinline__ unsigned long long mass_at(const uint32_t* mlo, const uint32_t* mhi,
                                                      int bin) {
  return ((unsigned long long)mhi[bin] << 32) + mlo[bin];
}

// The warp's scan of a radix pass (select_src: 256 bins, 8 per lane; radix_select: 2048, 64 per
// lane): lane L sums its `per` bins from hi = nbins - 1 - L per down (counts; fixed-point masses
// in mode 1; its lowest non-empty bin), then the inclusive prefix over the lanes.
struct BinPrefix {
  long long lc, pc;
  unsigned long long lm, pm;
  int last_ne;
};
__device__ __forceinline__ BinPrefix bin_prefix(const uint32_t* cnt, const uint32_t* mlo,
                                                const uint32_t* mhi, int mode, int hi, int per,
                                                int lane) {
  BinPrefix r{0, 0, 0, 0, -1};
  for (int b = hi; b > hi - per; --b) {
    r.lc += cnt[b];
    if (mode == 1) r.lm += mass_at(mlo, mhi, b);
    if (cnt[b]) r.last_ne = b;
  }
  r.pc = r.lc;
  r.pm = r.lm;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const long long c2 = __shfl_up_sync(0xffffffffu, r.pc, o);
    const unsigned long long m2 = __shfl_up_sync(0xffffffffu, r.pm, o);
    if (lane >= o) {
      r.pc += c2;
      r.pm += m2;
    }
  }
  return r;
}
// The lane whose bins first reach the goal (count `need` / mass `target` on top of what lies above
// the prefix), or, when rounding leaves it unreached, the lane of the lowest non-empty bin.
__device__ __forceinline__ int goal_lane(const BinPrefix& b, int mode, long long above_cnt,
                                         long long need, unsigned long long above_mass,
                                         double target) {
  bool hit;
  if (mode == 0) hit = (above_cnt + (b.pc - b.lc) < need) && (above_cnt + b.pc >= need);
  else hit = ((double)(above_mass + (b.pm - b.lm)) < target) && ((double)(above_mass + b.pm) >= target);
  const unsigned hitmask = __ballot_sync(0xffffffffu, hit && b.lc > 0);
  if (hitmask) return __ffs(hitmask) - 1;
  const unsigned ne = __ballot_sync(0xffffffffu, b.last_ne >= 0);
  return ne ? 31 - __clz(ne) : 0;
}
// In that lane: its bin holding the goal (c / m: the count / mass above the lane's bins on entry,
// above the chosen bin on return).
__device__ __forceinline__ int goal_bin(const uint32_t* cnt, const uint32_t* mlo,
                                        const uint32_t* mhi, int mode, int hi, int per,
                                        int last_ne, long long need, double target, long long& c,
                                        unsigned long long& m) {
  int chosen = last_ne < 0 ? hi : last_ne;
  for (int b = hi; b > hi - per; --b) {
    if (cnt[b] == 0) continue;
    const unsigned long long mb = mode == 1 ? mass_at(mlo, mhi, b) : 0ull;
    const bool reach = (mode == 0) ? (c + (long long)cnt[b] >= need) : ((double)(m + mb) >= target);
    if (reach || b == last_ne) {
      chosen = b;
      break;
    }
    c += cnt[b];
    m += mb;
  }
  return chosen;
}

struct WSel {
  uint32_t key;                   // the selected key K
  long long above_cnt;            // entries with key > K
  unsigned long long above_mass;  // their fixed-point mass (mode 1)
  int eq_cnt;                     // entries with key == K
  unsigned long long total;       // mode 1: the mass of every entry f accepts (the first pass's)
  bool reached;                   // mode 1: total >= target (else the select stopped there)
};

struct NoMass {
  __device__ __forceinline__ unsigned long long operator()(uint32_t) const { return 0ull; }
};
// Who runs a select (select_src) or a token search (list_token): one warp (WarpTeam), or the
// kRowWarps warps of a CTA (CtaTeam: every warp walks its share of the entries into the shared
// bins, warp 0 scans them and hands the results over in TeamSmem).
struct TeamSmem {
  uint32_t chosen;
  int eqc, reached;
  long long c;
  unsigned long long mm, total;
  float wf[kRowWarps];
  double wv[kRowWarps];
  int wi[kRowWarps];
  unsigned long long wz[3][kRowWarps];
};
struct WarpTeam {
  static constexpr bool kCta = false;
  static constexpr int kSize = 32;
  int lane;
  __device__ __forceinline__ int rank() const { return lane; }
  __device__ __forceinline__ int warp() const { return 0; }
  __device__ __forceinline__ void sync() const { __syncwarp(); }
};
struct CtaTeam {
  static constexpr bool kCta = true;
  static constexpr int kSize = kRowWarps * 32;
  int lane;
  TeamSmem* sm;
  __device__ __forceinline__ int rank() const { return (int)threadIdx.x; }
  __device__ __forceinline__ int warp() const { return (int)(threadIdx.x >> 5); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
};
__device__ __forceinline__ TeamSmem* team_smem(const WarpTeam&) { return nullptr; }
__device__ __forceinline__ TeamSmem* team_smem(const CtaTeam& t) { return t.sm; }

// Warp radix select over a source of entries: each(g) calls g(c, a, key) for this lane's entries
// (a: the processed value, key = fkey(a)): finish_filtered's list S, or small_filter_kernel's
// row in shared memory. Among the entries for which f(c, a, key) is true (f may replace key, e.g.
// by the inverted column for a tie cut), the key K at which the count (mode 0: reaching `need`)
// or the fixed-point mass mf(key) (mode 1: reaching target = tgt(total), total = the mass of all
// the entries f accepts, summed by the first pass; computed only for the entries inside the
// current prefix) accumulated from the largest key down first reaches the goal: the largest K
// whose count / mass at or above it reaches the goal, so any digit layout gives the same K.
// hist / hm: this warp's shared bins (hm: kWBins 64-bit words, used as 2 x kWBins 32-bit ones).
// lst (optional, room for every entry; lcnt: a shared counter): after the first pass the entries
// inside the prefix are listed (column, source key), and the other three passes walk that list.
template <int mode, typename Team, typename Each, typename F, typename TG, typename MF = NoMass>
__device__ __forceinline__ WSel select_src(const Team& team, const Each& each,
                                           long long need, const TG& tgt, unsigned* hist,
                                           unsigned long long* hm, F f, MF mf = MF{},
                                           int2* lst = nullptr, unsigned* lcnt = nullptr) {
  const int lane = team.lane;
  uint32_t* mlo = reinterpret_cast<uint32_t*>(hm);  // bin masses: two 32-bit words (mass_add)
  uint32_t* mhi = mlo + kWBins;
  uint32_t prefix = 0, pmask = 0;
  long long above_cnt = 0;
  unsigned long long above_mass = 0, total = 0;
  double target = 0;
  int eqc_last = 0;
  int nlst = -1;  // >= 0: the passes walk lst[0, nlst)
  WSel r;
  r.reached = true;
  for (int pass = 0; pass < 4; ++pass) {
    const int sh = 24 - 8 * pass;
    for (int i = team.rank(); i < kWBins; i += Team::kSize) {
      hist[i] = 0u;
      mlo[i] = 0u;
      mhi[i] = 0u;
    }
    if (lst != nullptr && pass == 1) {
      // The entries inside the first digit's bin, listed (no masses, no bins: on a dense walk
      // the exp of the few entries inside would run in most steps of the warp).
      if (team.rank() == 0) *lcnt = 0u;
      team.sync();
      each([&](int c, float a, uint32_t key0) {
        uint32_t key = key0;
        if (f(c, a, key) && (key & pmask) == prefix) lst[atomicAdd(lcnt, 1u)] = make_int2(c, (int)key0);
      });
      team.sync();
      __threadfence();
      nlst = (int)*lcnt;
    }
    team.sync();
    auto visit = [&](int c, float a, uint32_t key0) {
      uint32_t key = key0;
      if (!f(c, a, key)) return;
      if ((key & pmask) != prefix) return;  // the mass only for entries inside the prefix
      const uint32_t bin = (key >> sh) & 255u;
      atomicAdd(&hist[bin], 1u);
      if (mode == 1) mass_add(mlo, mhi, bin, mf(key));
    };
    if (nlst >= 0) {
      for (int j = team.rank(); j < nlst; j += Team::kSize) {
        const int2 e = __ldcg(lst + j);
        visit(e.x, fkey_inv((uint32_t)e.y), (uint32_t)e.y);
      }
    } else {
      each(visit);
    }
    team.sync();
    long long c = 0;
    unsigned long long mm = 0;
    int chosen = 0, eqc = 0;
    bool stop = false;
    if (team.warp() == 0) {
      // Lane L owns bins 255 - 8L down to 248 - 8L (descending keys across the lanes).
      const int hi = kWBins - 1 - 8 * lane;
      const BinPrefix bp = bin_prefix(hist, mlo, mhi, mode, hi, 8, lane);
      if (mode == 1 && pass == 0) {
        total = __shfl_sync(0xffffffffu, bp.pm, 31);
        target = tgt(total);
        stop = !((double)total >= target);  // the goal lies beyond the entries: no select
      }
      if (!stop) {
        const int srcl = goal_lane(bp, mode, above_cnt, need, above_mass, target);
        if (lane == srcl) {
          c = above_cnt + (bp.pc - bp.lc);
          mm = above_mass + (bp.pm - bp.lm);
          chosen = goal_bin(hist, mlo, mhi, mode, hi, 8, bp.last_ne, need, target, c, mm);
          eqc = (int)hist[chosen];
        }
        chosen = __shfl_sync(0xffffffffu, chosen, srcl);
        c = __shfl_sync(0xffffffffu, c, srcl);
        mm = __shfl_sync(0xffffffffu, mm, srcl);
        eqc = __shfl_sync(0xffffffffu, eqc, srcl);
      }
      if constexpr (Team::kCta) {
        if (lane == 0) {
          TeamSmem& t = *team_smem(team);
          t.chosen = (uint32_t)chosen;
          t.c = c;
          t.mm = mm;
          t.eqc = eqc;
          t.total = total;
          t.reached = stop ? 0 : 1;
        }
      }
    }
    if constexpr (Team::kCta) {
      team.sync();
      const TeamSmem& t = *team_smem(team);
      chosen = (int)t.chosen;
      c = t.c;
      mm = t.mm;
      eqc = t.eqc;
      total = t.total;
      stop = t.reached == 0;
    }
    team.sync();  // every thread has read the bins (and the hand-over) before the next pass
    if (stop) {
      r.reached = false;
      break;
    }
    prefix |= (uint32_t)chosen << sh;
    pmask |= 255u << sh;
    above_cnt = c;
    above_mass = mm;
    eqc_last = eqc;
  }
  r.key = prefix;
  r.above_cnt = above_cnt;
  r.above_mass = above_mass;
  r.eq_cnt = eqc_last;
  r.total = total;
  return r;
}

// One block's terms of an unfiltered row's sums (statistics: Za, Ea over a; Zl, El over l for
// guided statistics), relative to the row maxima Ma / Ml. Both finishes (the warp per row and the
// CTA per row's warp 0) add them in the same order, b = lane, lane + 32, ..., with explicit fma,
// and reduce with warp_sumd: a row's statistics do not depend on which finish ran (the choice
// follows the batch's row count); small_plain_kernel adds its (at most two) blocks' terms the
// same way from registers. Returns the block's a-maximum (-inf: no finite column).
// R: the record's fields, read when needed (RecL2: __ldcg of a BlockRec; RecReg: a register copy).
struct RecL2 {
  const BlockRec* p;
  __device__ __forceinline__ float maxl() const { return __ldcg(&p->maxl); }
  __device__ __forceinline__ float sa() const { return __ldcg(&p->sa); }
  __device__ __forceinline__ float ea() const { return __ldcg(&p->ea); }
  __device__ __forceinline__ float sl() const { return __ldcg(&p->sl); }
  __device__ __forceinline__ float el() const { return __ldcg(&p->el); }
};
struct RecReg {
  BlockRec r;
  __device__ __forceinline__ float maxl() const { return r.maxl; }
  __device__ __forceinline__ float sa() const { return r.sa; }
  __device__ __forceinline__ float ea() const { return r.ea; }
  __device__ __forceinline__ float sl() const { return r.sl; }
  __device__ __forceinline__ float el() const { return r.el; }
};
template <class R>
__device__ __forceinline__ float add_rec_terms(const R& rec, bool need_a, bool stats_guided,
                                               float invT, float Ma, float Ml, double& Za,
                                               double& Ea, double& Zl, double& El) {
  const float m1 = rec.maxl();
  if (m1 == neg_inf()) return neg_inf();
  float ma = 0.f;
  if (need_a) {
    ma = xform(m1, invT);
    const double sa = (double)rec.sa();
    const double ea = (double)rec.ea();
    const double dm = (double)ma - (double)Ma;
    const double w = exp(dm);
    Za = fma(sa, w, Za);
    Ea = fma(w, fma(dm, sa, ea), Ea);
  }
  if (stats_guided) {
    const double sl = (double)rec.sl();
    const double el = (double)rec.el();
    const double dm = (double)m1 - (double)Ml;
    const double w = exp(dm);
    Zl = fma(sl, w, Zl);
    El = fma(w, fma(dm, sl, el), El);
  }
  return ma;
}
__device__ __forceinline__ float add_block_terms(const BlockRec* recs, int b, bool need_a,
                                                 bool stats_guided, float invT, float Ma, float Ml,
                                                 double& Za, double& Ea, double& Zl, double& El) {
  return add_rec_terms(RecL2{recs + b}, need_a, stats_guided, invT, Ma, Ml, Za, Ea, Zl, El);
}

// Re-reads block `blk` of the row (L2 or HBM, 1024 columns): the first column holding M (the row
// maximum, which this block holds) and the block's runner-up (by min/max, as a multiset).
template <int DT>
__device__ __noinline__ Top2 block_top2(const SampleParams& P, const Req& q, int row, int blk,
                                        float M, int lane) {
  float lv[32];
  load_block_l<DT, true>(P, q, row, blk, lane, lv);
  float b1 = neg_inf(), b2 = neg_inf();
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    b2 = fmaxf(b2, fminf(b1, lv[e]));
    b1 = fmaxf(b1, lv[e]);
  }
  int am = INT_MAX;
  if (b1 == M) {
#pragma unroll
    for (int e = 31; e >= 0; --e)
      if (lv[e] == M) am = col_of<DT>(blk, lane, e);
  }
  Top2 tb{b1, am, b2};
  return warp_top2(tb);
}

// Thresholds of a filtered row (finish_filtered step 3, small_filter_kernel): the kept set is
// the prefix key > kthr || (key == kthr && t <= cid) of the order (a desc, t asc), and a >= amin.
// each(g): g(c, a, fkey(a)) for this lane's entries of the source (nS entries in all: the
// candidates S, or every finite column of the row when `complete`); every finite column outside
// the source has a <= Ua. outside(): the fixed-point mass of the finite columns outside the
// source (asked for only by top-p without top-k; warp-collective). ok = false: the candidates
// cannot settle top-k; inside = false: the kept set is not provably inside the source. lst / lcnt:
// select_src's optional list (room for nS entries).
struct FiltThr {
  uint32_t kthr;
  int cid;
  bool ok, inside;
};
template <class Team, class Each, class Out>
__device__ __forceinline__ FiltThr filter_thresholds(const Team& team, const SampleParams& P,
                                                     const Req& q, const Each& each, int nS,
                                                     bool complete, float m, double md,
                                                     float amin, float Ua, unsigned* hist,
                                                     unsigned long long* hm, const Out& outside,
                                                     int2* lst = nullptr, unsigned* lcnt = nullptr) {
  uint32_t kthr = 0;
  int cid = INT_MAX;
  bool inside = complete;  // the kept set provably lies in the source
  bool ok = true;
  bool applied_k = false;
  auto no_target = [](unsigned long long) { return 0.0; };
  auto tie_cut = [&](uint32_t K, int rr) -> int {
    const WSel s = select_src<0>(team, each, rr, no_target, hist, hm,
                                 [&](int c, float, uint32_t& key) {
                                   if (key != K) return false;
                                   if (key == kthr && c > cid) return false;
                                   key = ~(uint32_t)c;
                                   return true;
                                 }, NoMass{}, lst, lcnt);
    return (int)~s.key;
  };
  if (q.k > 0 && q.k < P.V) {
    if (complete && q.k >= nS) {
      // k >= |K0|: top-k is off.
    } else if (nS < q.k) {
      ok = false;
    } else {
      const WSel s = select_src<0>(team, each, q.k, no_target, hist, hm,
                                   [](int, float, uint32_t&) { return true; }, NoMass{}, lst, lcnt);
      const int rr = q.k - (int)s.above_cnt;
      int c2 = INT_MAX;
      if (rr < s.eq_cnt) c2 = tie_cut(s.key, rr);
      kthr = s.key;
      cid = c2;
      inside = true;
      applied_k = true;
    }
  }
  if (ok && q.p < 1.f) {
    if (q.p <= 0.f) {
      if (nS == 0) {
        ok = false;
      } else {
        const uint32_t K = fkey(m);
        const int c2 = tie_cut(K, 1);
        kthr = K;
        cid = c2;
        inside = true;
      }
    } else {
      auto mass_of = [&](uint32_t kk) {  // fixed-point mass of the column of key kk
        // (exactly 0 from d <= -32: exp(-32) 2^44 = 0.22 rounds to 0; no exp for those)
        const double d = (double)fkey_inv(kk) - md;
        return d > -32.0 ? __double2ull_rn(exp(d) * kMassScale) : 0ull;
      };
      // Z1 = the mass of K1 (fixed point): zs, the part in the source (the select's first pass
      // sums it), plus the rest of the row when no top-k; the target p Z1.
      const double zo = applied_k ? 0.0 : outside();
      const double p = (double)q.p;
      const WSel s = select_src<1>(team, each, 0,
                                   [&](unsigned long long zs) { return p * ((double)zs + zo); },
                                   hist, hm,
                                   [&](int c, float, uint32_t& key) {
                                     return !(key < kthr || (key == kthr && c > cid));
                                   }, mass_of, lst, lcnt);
      if (s.reached) {
        const double target = p * ((double)s.total + zo);
        const uint32_t K = s.key;
        const unsigned long long A = s.above_mass;
        const double e = (double)mass_of(K);
        long long nk;
        if ((double)A >= target) nk = 1;
        else nk = (long long)ceil((target - (double)A) / e);
        if (nk < 1) nk = 1;
        if (nk < s.eq_cnt) {
          cid = tie_cut(K, (int)nk);
        } else if (K != kthr) {
          cid = INT_MAX;
        }
        kthr = K;
        inside = true;
      }
      // else: the boundary lies beyond S (K2 contains S): only min-p can bound the kept set.
    }
  }
  if (ok && q.minp > 0.f && amin > Ua) inside = true;
  return FiltThr{kthr, cid, ok, inside};
}

// The kept set of a filtered row (filter_thresholds): key > kthr || (key == kthr && t <= cid),
// and a >= amin.
struct Kept {
  uint32_t kthr;
  int cid;
  float amin;
  __device__ __forceinline__ bool operator()(int c, float a) const {
    const uint32_t kk = fkey(a);
    return (kk > kthr || (kk == kthr && c <= cid)) && a >= amin;
  }
};
// A kept column's fixed-point terms (order-free integer sums): returns its mass exp(a - m)
// x 2^44 and adds exp(a - m) (a - m) x 2^44 to ef.
__device__ __forceinline__ unsigned long long kept_terms(float a, double md, long long& ef) {
  const double d = (double)a - md;
  const double x = exp(d);
  ef += __double2ll_rn(x * d * kMassScale);
  return __double2ull_rn(x * kMassScale);
}

// The token of a filtered row: approximate Gumbels (fp32, approx_gumbel) for the kept columns
// (in_k(c, a), a = to_a(the entry's value)) of the winning block bbest among the list S[0, nS),
// each lane keeping its best
// two; the exact float64 score for each lane's best when it is within approx_margin of the warp's
// best (the token the exact scores pick is among those), a second walk scoring every such column
// only when some lane's runner-up is that close too. Exact scores for every kept column had been
// ~22% of cand_finish's instructions at 4096 x 1025 top-p (ncu, 2026-11-29); a second walk every
// time cost top-k / min-p rows 2-5%. Returns the token (warp-uniform; INT_MAX: no kept column).
template <class Team, class K, class A>
__device__ __forceinline__ int list_token(const Team& team, const Req& q, uint32_t pos,
                                          const int2* S, int nS, int bbest, const K& in_k,
                                          const A& to_a) {
  const int lane = team.lane;
  const int w = team.warp();
  const int j0 = 128 * w + lane, step = 128 * (Team::kSize / 32);
  double bv = 0;
  int bt = INT_MAX;
  if (bbest != INT_MAX) {
    Best2 bs{neg_inf(), neg_inf()};
    float a1 = 0.f;
    int c1 = -1;
    for_list(S, nS, lane, [&](int c, float l) {
      if ((c >> 10) != bbest) return;
      const float a = to_a(l);
      if (!in_k(c, a)) return;
      if (bs.add(a + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)c, kSaltToken)))) {
        c1 = c;
        a1 = a;
      }
    }, j0, step);
    const float s1 = bs.s1, s2 = bs.s2;
    float bf = warp_max(s1);
    if constexpr (Team::kCta) {
      TeamSmem& t = *team_smem(team);
      if (lane == 0) t.wf[w] = bf;
      team.sync();
#pragma unroll
      for (int u = 0; u < kRowWarps; ++u) bf = fmaxf(bf, t.wf[u]);
    }
    const float thr = bf - approx_margin(bf);
    // (thr NaN: every lane with two kept columns walks again, a lane with one scores it exactly)
    bool again = s2 != neg_inf() && !(s2 < thr);
    if constexpr (Team::kCta) again = __syncthreads_or(again) != 0;
    else again = __ballot_sync(0xffffffffu, again) != 0u;
    if (again) {
      for_list(S, nS, lane, [&](int c, float l) {
        if ((c >> 10) != bbest) return;
        const float a = to_a(l);
        if (!in_k(c, a)) return;
        const uint64_t bits = random_bits(q.seed, q.step, pos, (uint32_t)c, kSaltToken);
        if (a + approx_gumbel(bits) < thr) return;
        argmax_merge(bv, bt, (double)a + bits_to_gumbel(bits), c);
      }, j0, step);
    } else if (c1 >= 0 && !(s1 < thr)) {
      argmax_merge(bv, bt, (double)a1 + gumbel(q.seed, q.step, pos, (uint32_t)c1, kSaltToken), c1);
    }
  }
  warp_argmax(bv, bt);
  if constexpr (Team::kCta) {  // (every thread passes the barriers: bbest is CTA-uniform)
    TeamSmem& t = *team_smem(team);
    if (lane == 0) {
      t.wv[w] = bv;
      t.wi[w] = bt;
    }
    team.sync();
    bv = 0;
    bt = INT_MAX;
    for (int u = 0; u < kRowWarps; ++u) argmax_merge(bv, bt, t.wv[u], t.wi[u]);
    team.sync();  // (the hand-over is read before anyone writes it again)
  }
  return bt;
}

// A filtered row's guided statistics: one block's terms (maximum m1, sums sl / el of its record)
// relative to the row maximum Ml, in the order finish_filtered has always added them.
__device__ __forceinline__ void guided_terms(float m1, float slf, float elf, float Ml, double& Zl,
                                             double& El) {
  const double sl = (double)slf;
  const double el = (double)elf;
  const double dm = (double)m1 - (double)Ml;
  const double w = exp(dm);
  Zl += sl * w;
  El += w * (el + dm * sl);
}
// A filtered row's outputs and RowInfo (one thread): token, first argmax column, runner-up m2
// of l, maxima Ml (l) and m (a), the thresholds, the kept set's fixed-point sums (zf, ef) and
// size nk, the guided sums Zl / El (stats_guided).
template <int DT>
__device__ __forceinline__ void filtered_outputs(const SampleParams& P, const Req& q, int row,
                                                 int token, int amax, float m2, float Ml, float m,
                                                 uint32_t kthr, int cid, float amin,
                                                 unsigned long long zf, long long ef, int nk,
                                                 double Zl, double El) {
  RowInfo ri;
  ri.empty = 0;
  ri.token = token;
  ri.invT = q.invT;
  ri.kthr = kthr;
  ri.cid = cid;
  ri.amin = amin;
  double logprob, conf, margin, ent;
  const float lt = load_l<DT>(P, q, row, token);
  if (P.stats_guided) {
    const double logS = log(Zl);
    logprob = ((double)lt - (double)Ml) - logS;
    conf = exp(-logS);
    const double p2 = (m2 == neg_inf()) ? 0.0 : exp(((double)m2 - (double)Ml) - logS);
    margin = conf - p2;
    ent = logS - El / Zl;
    ri.mode = 0;
    ri.use_a = 0;
    ri.logS = logS;
    ri.M = Ml;
  } else {
    const double Z = (double)zf / kMassScale;
    const double E = (double)ef / kMassScale;
    const double logS = log(Z);
    logprob = ((double)xform(lt, q.invT) - (double)m) - logS;
    conf = exp(-logS);
    const double p2 = (nk < 2) ? 0.0 : exp(((double)xform(m2, q.invT) - (double)m) - logS);
    margin = conf - p2;
    ent = logS - E / Z;
    ri.mode = 2;
    ri.use_a = 1;
    ri.logS = logS;
    ri.M = m;
  }
  if (ent < 0) ent = 0;
  write_outputs(P, row, token, amax, logprob, conf, margin, ent);
  P.rowinfo[row] = ri;
}

template <int DT>
__device__ __noinline__ void finish_filtered(const SampleParams& P, const Req& q, int row, int lane,
                                             unsigned* hist, unsigned long long* hm) {
  const int nb = P.nblocks;
  const int L = P.cand_cap;
  const BlockRec* recs = P.recs + (long long)row * nb;
  int2* cl = P.cand + (long long)row * nb * L;  // the row's lists; S is compacted to its front
  const float invT = q.invT;
  // 1. Headers: max / argmax / second of l, U = max tau.
  // (The block holding the maximum re-read for its first column and runner-up: the row pass
  // keeps only block maxima.)
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  float Ul = -FLT_MAX;
  for (int b = lane; b < nb; b += 32) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    Top2 o{m1, P.pass_top2 ? __ldcg(&recs[b].amax) : b, P.pass_top2 ? __ldcg(&recs[b].second) : neg_inf()};
    t = top2_merge(t, o);
    Ul = fmaxf(Ul, __ldcg(&recs[b].ea));
  }
  t = warp_top2(t);
  Ul = warp_max(Ul);
  if (t.m1 == neg_inf()) {
    if (lane == 0) write_empty(P, row);
    return;
  }
  if (!P.pass_top2) {
    const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
    t.i1 = tb.i1;
    t.m2 = fmaxf(t.m2, tb.m2);
  }
  const float Ml = t.m1;
  const int amax = t.i1;
  const float m = xform(Ml, invT);
  const double md = (double)m;
  // Every finite column outside the lists has l < Ul, so a <= Ua; complete: no such column.
  const bool complete = !(Ul > -FLT_MAX);
  const float Ua = complete ? neg_inf() : xform(nextafterf(Ul, neg_inf()), invT);
  const bool topk_on = q.k > 0 && q.k < P.V;
  // The min-p threshold (a >= amin is kept) depends on m only.
  float amin = neg_inf();
  if (q.minp > 0.f) {
    float x = 0.f;
    if (lane == 0) x = minp_threshold(m, md, q.minp);
    amin = __shfl_sync(0xffffffffu, x, 0);
  }

  // 1b. A lower bound lo on the kept values, from the block records alone: with top-k, the k-th
  // largest block maximum (k distinct columns reach it, so every kept value does), rounded down
  // to the 12 high bits of its key (12 count passes over keys in shared memory); with min-p alone
  // (no top-k or top-p), amin. Candidates below lo cannot be kept and leave S, and blocks whose
  // maximum is below lo are not read at all: on Gaussian 262144-column rows with top-k 50, S
  // shrinks from ~1400 candidates to ~100 and the blocks read from ~256 to ~60. Every decision
  // below is unchanged: with top-k, |S| >= k before iff after (the k largest of S all reach lo),
  // and the selection, masses and token only ever look at the kept set, which lies in S.
  float lo = neg_inf();
  if (topk_on && !complete && nb <= kWBins * 3) {
    unsigned* keys = hist;  // (free until the half-chunk list below)
    int nfin = 0;
    for (int b = lane; b < nb; b += 32) {
      const float m1 = __ldcg(&recs[b].maxl);
      const bool fin = m1 != neg_inf();
      keys[b] = fin ? fkey(m1) : 0u;
      nfin += fin ? 1 : 0;
    }
    nfin = warp_sumi(nfin);
    __syncwarp();
    if (q.k <= nfin) {
      uint32_t pre = 0;
      for (int bit = 31; bit >= 20; --bit) {
        const uint32_t cand = pre | (1u << bit);
        int c = 0;
        for (int b = lane; b < nb; b += 32) c += keys[b] >= cand ? 1 : 0;
        if (warp_sumi(c) >= q.k) pre = cand;
      }
      // (keys of finite values are >= fkey(-FLT_MAX) = 0x00800000; below it: no bound)
      if (pre >= 0x00800000u) lo = xform(fkey_inv(pre), invT);
    }
    __syncwarp();  // every lane has read the keys before the list below overwrites them
  } else if (!topk_on && !(q.p < 1.f) && q.minp > 0.f) {
    lo = amin;
  }

  // 2. Compact S = {candidates with a > Ua and a >= lo} to the front of the row's list area
  // (block order; every write index <= its read index, and a chunk is read before it is written).
  int nS = 0;
  unsigned long long zout = 0;  // fixed-point mass of the candidates outside S (top-p, no top-k)
  // (with top-k the masses outside S are never used: Z1 is the kept top-k mass, or, when top-k is
  // off because k >= |K0|, the lists are complete and nothing lies outside S)
  const bool want_zout = q.p < 1.f && q.p > 0.f && !topk_on;
  // Non-empty 16-slot half-chunks of the lists, in slot order, as (half-chunk << 5) | entries,
  // in the bins' shared memory (hist and hm, free until the selection); a warp-wide step takes two
  // (lanes 0-15 and 16-31: a Gaussian block lists ~14 columns, so one 32-slot chunk per step left
  // half the lanes idle, and the steps are the finish's longest loop: ncu 2026-11-29, 4096 x 262144
  // bf16 top-k, ~280 chunk steps and half of the kernel's instructions). Blocks whose maximum is
  // not above Ua hold nothing of S and are skipped unless the mass outside S is wanted. More
  // half-chunks than fit: every 32-slot chunk, one per step.
  constexpr int kHcCap = kWBins * 3;
  unsigned* hcl = hist;
  const int cpb = L / 32;  // 32-slot chunks per block list
  const int hpb = L / 16;  // half-chunks per block list
  int nh = 0;
  for (int b0 = 0; b0 < nb; b0 += 32) {
    const int b = b0 + lane;
    int n = 0;
    if (b < nb) {
      n = __ldcg(&recs[b].pad);
      if (!want_zout && n > 0) {
        const float ma = xform(__ldcg(&recs[b].maxl), invT);
        if (!(ma > Ua && ma >= lo)) n = 0;
      }
    }
    const int c = (n + 15) >> 4;
    int incl = c;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    const int base = nh + incl - c;
    for (int p = 0; p < c && base + p < kHcCap; ++p)
      hcl[base + p] = ((unsigned)(b * hpb + p) << 5) | (unsigned)min(16, n - 16 * p);
    nh += __shfl_sync(0xffffffffu, incl, 31);
  }
  __syncwarp();
  const bool listed = nh <= kHcCap;
  const int nsteps = listed ? (nh + 1) >> 1 : nb * cpb;
  const int hl = lane & 15;
  const int hsel = lane >> 4;
  constexpr int kU = 8;  // steps in flight (loads independent of the writes)
  for (int s0 = 0; s0 < nsteps; s0 += kU) {
    int2 ev[kU];
    bool valid[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      valid[u] = false;
      ev[u] = make_int2(0, 0);
      const int si = s0 + u;
      if (si < nsteps) {
        long long slot = -1;
        if (listed) {
          const int hi = 2 * si + hsel;
          if (hi < nh) {
            const unsigned e = hcl[hi];
            if (hl < (int)(e & 31u)) slot = (long long)(e >> 5) * 16 + hl;
          }
        } else {
          const int b = si / cpb;
          const int cnt = __ldcg(&recs[b].pad) - (si - b * cpb) * 32;
          if (lane < cnt) slot = (long long)si * 32 + lane;
        }
        if (slot >= 0) {
          valid[u] = true;
          ev[u] = __ldcg(cl + slot);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float a = neg_inf();
      if (valid[u]) a = xform(__int_as_float(ev[u].y), invT);
      const bool in = valid[u] && a > Ua && a >= lo;
      if (want_zout && valid[u] && !in) zout += __double2ull_rn(exp((double)a - md) * kMassScale);
      const unsigned bal = __ballot_sync(0xffffffffu, in);
      if (in) cl[nS + __popc(bal & ((1u << lane) - 1u))] = ev[u];
      nS += __popc(bal);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) zout += __shfl_xor_sync(0xffffffffu, zout, o);
  __syncwarp();
  __threadfence();
  const int2* S = cl;

  // 3. Thresholds.
  auto each = [&](auto g) {
    for_list(S, nS, lane, [&](int c, float l) {
      const float a = xform(l, invT);
      g(c, a, fkey(a));
    });
  };
  const FiltThr th = filter_thresholds(WarpTeam{lane}, P, q, each, nS, complete, m, md, amin, Ua, hist, hm, [&]() {
    double zr = 0;
    for (int b = lane; b < nb; b += 32) {
      const float m1 = __ldcg(&recs[b].maxl);
      if (m1 == neg_inf()) continue;
      const double sr = (double)__ldcg(&recs[b].sa);
      if (sr > 0) zr += sr * exp((double)xform(m1, invT) - md);
    }
    zr = warp_sumd(zr);
    return zr * kMassScale + (double)zout;
  });
  const uint32_t kthr = th.kthr;
  const int cid = th.cid;
  if (!th.ok || !th.inside) {
    // Not provable from the candidates: the filter kernel samples this row from the logits.
    if (lane == 0) {
      const int slot = atomicAdd(P.fb_count, 1);
      P.fb_rows[slot] = row;
    }
    return;
  }
  const Kept in_k{kthr, cid, amin};

  // 4. Kept sums in fixed point (order-independent): per block, Z, E = sum e (a - m), count.
  unsigned long long* km = P.kmass + (long long)row * nb;
  for (int b = lane; b < nb; b += 32) km[b] = 0ull;
  __syncwarp();
  __threadfence();
  unsigned long long zf = 0;
  long long ef = 0;
  int nk = 0;
  for_list(S, nS, lane, [&](int c, float l) {
    const float a = xform(l, invT);
    if (!in_k(c, a)) return;
    const unsigned long long ux = kept_terms(a, md, ef);
    if (ux) atomicAdd(km + (c >> 10), ux);
    zf += ux;
    ++nk;
  });
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    zf += __shfl_xor_sync(0xffffffffu, zf, o);
    ef += __shfl_xor_sync(0xffffffffu, ef, o);
  }
  nk = warp_sumi(nk);
  __syncwarp();
  __threadfence();

  // 5. Winning block (float64 scores), then the token among its kept columns (exact Gumbels).
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  double best = 0;
  int bbest = INT_MAX;
  for (int b = lane; b < nb; b += 32) {
    const unsigned long long s = __ldcg(km + b);
    if (s == 0ull) continue;
    const double score = (md + log((double)s / kMassScale)) +
                         gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
    argmax_merge(best, bbest, score, b);
  }
  warp_argmax(best, bbest);
  const int bt = list_token(WarpTeam{lane}, q, pos, S, nS, bbest, in_k, [&](float l) { return xform(l, invT); });
  const int token = (bt == INT_MAX) ? amax : bt;

  // 6. Statistics: processed over the kept set, or guided over K0 from the block records.
  double Zl = 0, El = 0;
  if (P.stats_guided) {
    for (int b = lane; b < nb; b += 32) {
      const float m1 = __ldcg(&recs[b].maxl);
      if (m1 != neg_inf()) guided_terms(m1, __ldcg(&recs[b].sl), __ldcg(&recs[b].el), Ml, Zl, El);
    }
    Zl = warp_sumd(Zl);
    El = warp_sumd(El);
  }
  if (lane == 0)
    filtered_outputs<DT>(P, q, row, token, amax, t.m2, Ml, m, kthr, cid, amin, zf, ef, nk, Zl, El);
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32, 4) row_pass_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  const int lane = threadIdx.x & 31;
  // Blocks per warp: 16-bit rows P.fbpw consecutive blocks (the request's parameters, ~175 of
  // the ~640 instructions of a block, read once for them all); f32 one, known at compile time.
  const int fbpw = DT == 0 ? 1 : P.fbpw;
  const int wpr = (P.nblocks + fbpw - 1) / fbpw;  // warps per row
  const long long gw = (long long)blockIdx.x * kRowWarps + (threadIdx.x >> 5);
  const long long total = (long long)P.num_rows * wpr;
  if (gw >= total) return;
  int row, wi;
  if (DT != 0 && total <= 0x7fffffffLL) {  // 32-bit division (the 64-bit one is a call)
    row = (int)((unsigned)gw / (unsigned)wpr);
    wi = (int)gw - row * wpr;
  } else {  // (f32: as measured, the register allocation of the 32-bit branch spills more)
    row = (int)(gw / wpr);
    wi = (int)(gw - (long long)row * wpr);
  }
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  // Device row_offsets that are not monotone can map a row outside its request's range: such a
  // row is never guided, so no uncond row outside [0, uncond_num_rows) is ever read.
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  // Unfiltered rows belong to plain_pass_kernel / plain_finish_*_kernel.
  if (!is_filtered(q, P.V) || !kUseCandidates) return;
  // Per warp: its block's values while writing the list (each lane reads back only its own).
  __shared__ __align__(16) float s_stage[kRowWarps][kB];
  const int wid = threadIdx.x >> 5;
  // One block: lv = the lane's 32 values as loaded (whole aligned blocks unsanitised), its
  // maximum with NaN propagation: a NaN or +inf anywhere takes the exact rule (docs §2) in place,
  // as in plain_pass_kernel. The pass is ALU-bound, so no per-value argmax / runner-up work for
  // large grids: finish_filtered re-reads the one block holding the row's maximum (block_top2).
  auto block = [&](int blk, float (&lv)[32]) {
    float m1 = lv[0];
#pragma unroll
    for (int e = 1; e < 32; ++e) m1 = fmax_nan(m1, lv[e]);
    float M = warp_max_nan(m1);
    if (M != M || M == -neg_inf()) {
      m1 = neg_inf();
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        lv[e] = sanitize_fast(lv[e]);
        m1 = fmaxf(m1, lv[e]);
      }
      M = warp_max(m1);
    }
    BlockRec rec;
    rec.maxl = M;
    rec.second = neg_inf();
    rec.amax = INT_MAX;
    rec.sa = rec.ea = rec.sl = rec.el = 0.f;
    rec.pad = 0;
    if (P.pass_top2 && M != neg_inf()) {
      // Small grids (latency-bound): the block's runner-up (multiset) and first column of M here,
      // which saves the finish its re-read of the maximum's block. Exact either way.
      float b1 = neg_inf(), b2 = neg_inf();
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        b2 = fmaxf(b2, fminf(b1, lv[e]));
        b1 = fmaxf(b1, lv[e]);
      }
      int am = INT_MAX;
      if (b1 == M) {
#pragma unroll
        for (int e = 31; e >= 0; --e)
          if (lv[e] == M) am = col_of<DT>(blk, lane, e);
      }
      const Top2 tb = warp_top2(Top2{b1, am, b2});
      rec.second = tb.m2;
      rec.amax = tb.i1;
    }
    constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
    if (M != neg_inf()) {
      // Candidate list: every column with l >= tau; tau from the lane maxima (see finish_filtered).
      const int L = P.cand_cap;
      int2* lst = P.cand + ((long long)row * P.nblocks + blk) * L;
      int lvl = P.cand_lvl0;
      // Rows of <= 2 blocks keep every finite column, except small top-k: the columns at or
      // above the smallest lane maximum (~120 of 1024 on Gaussian rows) settle it.
      if (lvl < 0 && q.k > 0 && q.k <= 64) lvl = 0;
      float tau;
      int n, base;
      unsigned msk;
      for (;;) {
        if (lvl < 0) {
          tau = -FLT_MAX;
        } else {
          float h = m1;
          for (int o = 1; o < (1 << lvl); o <<= 1) h = fmaxf(h, __shfl_xor_sync(0xffffffffu, h, o));
          tau = fmaxf(-warp_max(-h), -FLT_MAX);
        }
        msk = 0u;
        if (m1 >= tau) {
          if constexpr (DT != 0) {
            // bit e = (lv[e] >= tau): the sign of lv[e] - tau (exact: a difference of distinct
            // floats is never zero, x - x is +0, and no NaN is left here), shifted in by one
            // funnel shift per value
#pragma unroll
            for (int e = 31; e >= 0; --e)
              msk = __funnelshift_l(__float_as_uint(__fsub_rn(lv[e], tau)), msk, 1);
            msk = ~msk;
          } else {  // (f32: the compare-and-select form measured faster)
#pragma unroll
            for (int e = 0; e < 32; ++e) msk |= (lv[e] >= tau) ? (1u << e) : 0u;
          }
        }
        const int cnt = __popc(msk);
        int incl = cnt;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int v = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += v;
        }
        n = __shfl_sync(0xffffffffu, incl, 31);
        base = incl - cnt;
        if (n <= L || lvl >= 5) break;
        ++lvl;
      }
      if (n > L) {  // ties at the block maximum beyond the capacity: no list, bound l <= M
        n = 0;
        msk = 0u;
        tau = (M == FLT_MAX) ? -neg_inf() : nextafterf(M, FLT_MAX);
      }
      // Write the list: the lane's values staged in shared memory (no dynamic register indexing).
      if (msk) {
        constexpr int VEC = Elt<DT>::VEC;
        float4* st = reinterpret_cast<float4*>(s_stage[wid]);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          st[j * 32 + lane] = make_float4(lv[4 * j], lv[4 * j + 1], lv[4 * j + 2], lv[4 * j + 3]);
        do {
          const int e = __ffs(msk) - 1;
          msk &= msk - 1u;
          const int col = blk * kB + (e / VEC) * 32 * VEC + lane * VEC + (e % VEC);
          const float v = s_stage[wid][(e >> 2) * 128 + lane * 4 + (e & 3)];
          lst[base++] = make_int2(col, __float_as_int(v));
        } while (msk);
      }
      rec.ea = tau;
      rec.pad = n;
      // Top-p without top-k: the mass outside the list (Z1 of the finish).
      if (q.p < 1.f && q.p > 0.f && !(q.k > 0 && q.k < P.V)) {
        const float ma = xform(M, q.invT);
        const float invT = q.invT;
        float s = 0.f;
        if (invT == 1.f) {
#pragma unroll
          for (int e = 0; e < 32; ++e) {
            const float x = ex2((lv[e] - ma) * kLog2e);
            s += (lv[e] < tau) ? x : 0.f;
          }
        } else {
#pragma unroll
          for (int e = 0; e < 32; ++e) {
            const float x = ex2((xform(lv[e], invT) - ma) * kLog2e);
            s += (lv[e] < tau) ? x : 0.f;
          }
        }
        rec.sa = warp_sum(s);
      }
      if (P.want_stats && P.stats_guided) {
        float s = 0.f, en = 0.f;
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          const float d = fmaxf((lv[e] - M) * kLog2e, -1000.f);
          const float x = ex2(d);
          s += x;
          en = fmaf(x, d, en);
        }
        rec.sl = warp_sum(s);
        rec.el = warp_sum(en) * kLn2;
      }
    }
    // cand_finish_kernel finishes the row after this kernel.
    if (lane == 0) P.recs[(long long)row * P.nblocks + blk] = rec;
  };
  if constexpr (DT == 0) {
    float lv[32];
    load_block_l<DT, false>(P, q, row, wi, lane, lv);
    block(wi, lv);
  } else {
    const int bb0 = wi * fbpw, bb1 = min(bb0 + fbpw, P.nblocks);
    const bool fastrow = P.vec_ok != 0 && !q.guided;
    const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
    for (int blk = bb0; blk < bb1; ++blk) {
      float lv[32];
      if (fastrow && (blk + 1) * kB <= P.V) {
        uint4 cr[NJ];
#pragma unroll
        for (int j = 0; j < NJ; ++j)
          cr[j] = *reinterpret_cast<const uint4*>(crow + blk * kB + j * 32 * VEC + lane * VEC);
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const T* ce = reinterpret_cast<const T*>(&cr[j]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = Elt<DT>::cvt(ce[e]);
        }
        // The banned column, if it lies in this block: one lane patches it (unrolled).
        const int bo = P.banned - blk * kB;
        if (bo >= 0 && bo < kB && ((bo / VEC) & 31) == lane) {
          const int idx = (bo / (32 * VEC)) * VEC + (bo % VEC);
#pragma unroll
          for (int e = 0; e < 32; ++e)
            if (e == idx) lv[e] = neg_inf();
        }
      } else {
        load_block_l<DT, false>(P, q, row, blk, lane, lv);
      }
      block(blk, lv);
    }
  }
}

// Filtered rows after row_pass_kernel: one warp per row merges the
// candidate lists and samples (finish_filtered).
template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32, 4) cand_finish_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  __shared__ __align__(16) unsigned s_bins[kRowWarps][kWBins * 3];  // 256 counts + 256 u64 masses
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const int row = blockIdx.x * (int)(blockDim.x >> 5) + wid;  // (blockDim.x <= kRowWarps * 32)
  if (row >= P.num_rows) return;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (!is_filtered(q, P.V)) return;
  finish_filtered<DT>(P, q, row, lane, &s_bins[wid][0],
                      reinterpret_cast<unsigned long long*>(&s_bins[wid][kWBins]));
}

// The outputs of an unfiltered row once its maximum Ml (first column amax, runner-up m2), sums
// and token are known (one thread). lt: l of the token when the caller has it (the finishes
// loaded it to score the token), NaN to re-read it (l is never NaN).
template <int DT>
__device__ __forceinline__ void plain_outputs(const SampleParams& P, const Req& q, int row,
                                              const Top2& t, float Ml, float Ma, int amax, int token,
                                              double Za, double Ea, double Zl, double El,
                                              float lt) {
  RowInfo ri;
  ri.empty = 0;
  ri.token = token;
  ri.invT = q.invT;
  ri.kthr = 0;
  ri.cid = 0;
  ri.amin = 0;
  double logprob = 0, conf = 1, margin = 1, ent = 0;
  if (P.stats_guided) {
    const double logS = log(Zl);
    float xt = 0.f;
    if (P.logprobs) xt = lt == lt ? lt : load_l<DT>(P, q, row, token);  // l of the token
    logprob = ((double)xt - (double)Ml) - logS;
    conf = exp(-logS);
    const double p2 = (t.m2 == neg_inf()) ? 0.0 : exp(((double)t.m2 - (double)Ml) - logS);
    margin = conf - p2;
    ent = log(Zl) - El / Zl;
    ri.mode = 0;
    ri.use_a = 0;
    ri.logS = logS;
    ri.M = Ml;
  } else if (q.greedy) {
    ri.mode = 1;
    ri.use_a = 0;
    ri.logS = 0;
    ri.M = 0.f;
  } else {
    const double logS = log(Za);
    float xt = 0.f;
    if (P.logprobs) xt = xform(lt == lt ? lt : load_l<DT>(P, q, row, token), q.invT);
    logprob = ((double)xt - (double)Ma) - logS;
    conf = exp(-logS);
    const double p2 = (t.m2 == neg_inf()) ? 0.0 : exp(((double)xform(t.m2, q.invT) - (double)Ma) - logS);
    margin = conf - p2;
    ent = log(Za) - Ea / Za;
    ri.mode = 0;
    ri.use_a = 1;
    ri.logS = logS;
    ri.M = Ma;
  }
  if (ent < 0) ent = 0;
  write_outputs(P, row, token, amax, logprob, conf, margin, ent);
  P.rowinfo[row] = ri;
}

// plain_finish_kernel: one CTA (kRowWarps warps) per unfiltered row, after plain_pass_kernel
// (stream order makes its block records visible; no counters). The row maximum and its first
// column (the block holding it re-read by warp 0: plain_pass_kernel keeps only block maxima and
// sums), the sums and block scores over the records, then the token in the winning block from its
// 1024 columns spread over the CTA (approximate Gumbels, exact float64 for the candidates).
struct FinSmem {
  Top2 t[kRowWarps];
  double bv[kRowWarps];
  int bi[kRowWarps];
  float bl[kRowWarps];  // l of each warp's best exact candidate
  float f[kRowWarps];
  Top2 top;
  int amax;  // first column of the row maximum (the last warp, block_top2)
  float m2;  // runner-up of the row
  double Z[4];
  double best;
  int bbest;
  // One chunk of kRowWarps * 32 blocks' terms (add_block_terms, split): w = exp(dm) and
  // inner = fma(dm, s, e) per block for a and for l; w < 0 marks a block without a finite column.
  double wa[kRowWarps * 32], sa[kRowWarps * 32], ia[kRowWarps * 32];
  double wl[kRowWarps * 32], sl[kRowWarps * 32], il[kRowWarps * 32];
};

__device__ __forceinline__ Top2 cta_top2(FinSmem& sm, Top2 v, int lane, int wid) {
  v = warp_top2(v);
  if (lane == 0) sm.t[wid] = v;
  __syncthreads();
  if (wid == 0) {
    Top2 w = lane < kRowWarps ? sm.t[lane] : Top2{neg_inf(), INT_MAX, neg_inf()};
    w = warp_top2(w);
    if (lane == 0) sm.top = w;
  }
  __syncthreads();
  return sm.top;
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32) plain_finish_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  __shared__ FinSmem sm;
  const int row = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
  constexpr int NT = kRowWarps * 32;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (is_filtered(q, P.V)) return;
  const int nb = P.nblocks;
  const BlockRec* recs = P.recs + (long long)row * nb;
  // The row maximum, the first block holding it, and the largest maximum of the other blocks
  // (= the maximum itself when two blocks hold it: runner-up of the multiset).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  for (int b = tid; b < nb; b += NT) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    t = top2_merge(t, Top2{m1, b, neg_inf()});
  }
  t = cta_top2(sm, t, lane, wid);
  if (t.m1 == neg_inf()) {
    if (tid == 0) write_empty(P, row);
    return;
  }
  const float Ml = t.m1;
  const bool need_a = !q.greedy;
  const bool sg = P.stats_guided != 0;
  const float Ma = need_a ? xform(Ml, q.invT) : 0.f;
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  // Sums relative to the global maxima in the warp finish's order (add_block_terms: lane L adds
  // blocks L, L + 32, ... with explicit fma, then warp_sumd), so that a row's statistics do not
  // depend on which finish ran: every thread computes one block's exp terms per chunk into shared
  // memory, warp 0 adds them in that order. Block scores: every thread, its blocks.
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  double best = 0;
  int bbest = INT_MAX;
  for (int c0 = 0; c0 < nb; c0 += NT) {
    const int b = c0 + tid;
    if (b < nb) {
      const float m1 = __ldcg(&recs[b].maxl);
      double wa = -1, wl = -1;
      // One side's terms (a: sa, ea against Ma; l: sl, el against Ml): w = exp(dm) returned.
      auto terms = [&](float m, float Mx, float s, float e, double* ss, double* ii) {
        const double dm = (double)m - (double)Mx;
        ss[tid] = (double)s;
        ii[tid] = fma(dm, (double)s, (double)e);
        return exp(dm);
      };
      if (m1 != neg_inf()) {
        if (need_a) {
          const float ma = xform(m1, q.invT);
          const float s = __ldcg(&recs[b].sa);
          wa = terms(ma, Ma, s, __ldcg(&recs[b].ea), sm.sa, sm.ia);
          const double score = ((double)ma + log((double)s)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
          argmax_merge(best, bbest, score, b);
        }
        if (sg) wl = terms(m1, Ml, __ldcg(&recs[b].sl), __ldcg(&recs[b].el), sm.sl, sm.il);
      }
      sm.wa[tid] = wa;
      sm.wl[tid] = wl;
    }
    __syncthreads();
    if (wid == 0) {
      for (int j = lane; j < NT && c0 + j < nb; j += 32) {
        const double wa = sm.wa[j], wl = sm.wl[j];
        if (wa >= 0) {  // (need_a: wa = -1 otherwise)
          Za = fma(sm.sa[j], wa, Za);
          Ea = fma(wa, sm.ia[j], Ea);
        }
        if (wl >= 0) {
          Zl = fma(sm.sl[j], wl, Zl);
          El = fma(wl, sm.il[j], El);
        }
      }
    }
    if (c0 + NT < nb) __syncthreads();  // the next chunk overwrites the terms
  }
  if (wid == kRowWarps - 1) {
    // The first column of the maximum and the runner-up: a re-read of the maximum's block, while
    // warp 0 adds the terms.
    const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
    if (lane == 0) {
      sm.amax = tb.i1;
      sm.m2 = fmaxf(t.m2, tb.m2);
    }
  }
  if (wid == 0) {
    Za = warp_sumd(Za);
    Ea = warp_sumd(Ea);
    Zl = warp_sumd(Zl);
    El = warp_sumd(El);
    if (lane == 0) {
      sm.Z[0] = Za;
      sm.Z[1] = Ea;
      sm.Z[2] = Zl;
      sm.Z[3] = El;
    }
  }
  warp_argmax(best, bbest);
  if (lane == 0) {
    sm.bv[wid] = best;
    sm.bi[wid] = bbest;
  }
  __syncthreads();
  if (tid == 0) {
    double bv = 0;
    int bi = INT_MAX;
    for (int w = 0; w < kRowWarps; ++w) argmax_merge(bv, bi, sm.bv[w], sm.bi[w]);
    sm.best = bv;
    sm.bbest = bi;
  }
  __syncthreads();
  Za = sm.Z[0];
  Ea = sm.Z[1];
  Zl = sm.Z[2];
  El = sm.Z[3];
  bbest = sm.bbest;
  int token = sm.amax;  // greedy: the argmax, whose l is Ml
  float lt = Ml;
  if (need_a) {
    // Token within the winning block: thread tid holds columns bbest*1024 + tid + k*NT.
    constexpr int PER = kB / NT;
    float sf[PER];
    float bf = neg_inf();
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int col = bbest * kB + tid + k * NT;
      sf[k] = (col < P.V) ? load_l<DT>(P, q, row, col) : neg_inf();
    }
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      const int col = bbest * kB + tid + k * NT;
      float v = neg_inf();
      if (sf[k] != neg_inf())
        v = xform(sf[k], q.invT) + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)col, kSaltToken));
      sf[k] = v;
      bf = fmaxf(bf, v);
    }
    bf = warp_max(bf);
    if (lane == 0) sm.f[wid] = bf;
    __syncthreads();
    bf = sm.f[0];
    for (int w = 1; w < kRowWarps; ++w) bf = fmaxf(bf, sm.f[w]);
    const float thr = bf - approx_margin(bf);
    double bv = 0;
    int bt = INT_MAX;
    float bl = 0.f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      // (thr may round to -inf at |a| ~ FLT_MAX: excluded columns stay out explicitly)
      if (sf[k] == neg_inf() || !(sf[k] >= thr)) continue;
      const int col = bbest * kB + tid + k * NT;
      const float l = load_l<DT>(P, q, row, col);
      const double v = (double)xform(l, q.invT) + gumbel(q.seed, q.step, pos, (uint32_t)col, kSaltToken);
      if (bt == INT_MAX || v > bv) bl = l;  // (columns ascend: a tie keeps the first)
      argmax_merge(bv, bt, v, col);
    }
    const int mine = bt;
    warp_argmax(bv, bt);
    const unsigned own = __ballot_sync(0xffffffffu, mine == bt && bt != INT_MAX);
    if (own) bl = __shfl_sync(0xffffffffu, bl, __ffs(own) - 1);
    if (lane == 0) {
      sm.bv[wid] = bv;
      sm.bi[wid] = bt;
      sm.bl[wid] = bl;
    }
    __syncthreads();
    if (tid == 0) {
      for (int w = 0; w < kRowWarps; ++w) {
        if (sm.bi[w] == INT_MAX) continue;
        if (bt == INT_MAX || sm.bv[w] > bv || (sm.bv[w] == bv && sm.bi[w] < bt)) {
          bv = sm.bv[w];
          bt = sm.bi[w];
          bl = sm.bl[w];
        }
      }
      token = bt;
      lt = bl;
    }
  }
  if (tid != 0) return;
  t.i1 = sm.amax;
  t.m2 = sm.m2;
  plain_outputs<DT>(P, q, row, t, Ml, Ma, t.i1, token, Za, Ea, Zl, El, lt);
}

// The same finish by one warp (plain_finish_warp_kernel: many rows, where one CTA per row would
// leave too few rows in flight).
template <int DT>
__device__ __noinline__ void finish_plain_warp(const SampleParams& P, const Req& q, int row, int lane) {
  const int nb = P.nblocks;
  const BlockRec* recs = P.recs + (long long)row * nb;
  // The row maximum, the first block holding it, and the largest maximum of the other blocks
  // (= the maximum itself when two blocks hold it: runner-up of the multiset).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  for (int b = lane; b < nb; b += 32) {
    const float m1 = __ldcg(&recs[b].maxl);
    if (m1 == neg_inf()) continue;
    Top2 o{m1, b, neg_inf()};
    t = top2_merge(t, o);
  }
  t = warp_top2(t);
  if (t.m1 == neg_inf()) {
    if (lane == 0) write_empty(P, row);
    return;
  }
  {
    const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
    t.i1 = tb.i1;
    t.m2 = fmaxf(t.m2, tb.m2);
  }
  const float Ml = t.m1;
  const int amax = t.i1;
  const bool need_a = !q.greedy;
  const float Ma = need_a ? xform(Ml, q.invT) : 0.f;
  const int i = row - q.row_begin;
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  // Sums relative to the global maxima, block scores.
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  double best = 0;
  int bbest = INT_MAX;
  // One block's sums; returns its a-maximum ma (-inf: no finite column).
  auto block_sum = [&](int b) -> float {
    return add_block_terms(recs, b, need_a, P.stats_guided != 0, q.invT, Ma, Ml, Za, Ea, Zl, El);
  };
  auto exact_score = [&](int b, float ma) {
    const double sa = (double)__ldcg(&recs[b].sa);
    return ((double)ma + log(sa)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
  };
  if (need_a && P.block_approx) {
    // Block scores first in fp32 (approx_gumbel, __logf: |error| < 1e-4 + 2.5e-7 |score|); the
    // exact float64 score only for blocks within twice approx_margin of the best one (the block
    // the exact scores pick is always among them). Each lane keeps its best two fp32 scores; a
    // lane whose second one is also within the margin (rare) scores all its blocks exactly.
    Best2 bs{neg_inf(), neg_inf()};
    int b1 = -1;
    for (int b = lane; b < nb; b += 32) {
      const float ma = block_sum(b);
      if (ma == neg_inf()) continue;
      const float sa = __ldcg(&recs[b].sa);
      if (bs.add((ma + __logf(sa)) + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)b, kSaltBlock))))
        b1 = b;
    }
    const float s1 = bs.s1, s2 = bs.s2;
    const float bf = warp_max(s1);
    const float thr = bf - 2.f * approx_margin(bf);
    const bool all_exact = s2 != neg_inf() && !(s2 < thr);  // (thr NaN: every block)
    if (b1 >= 0 && !all_exact) {
      if (!(s1 < thr)) argmax_merge(best, bbest, exact_score(b1, xform(__ldcg(&recs[b1].maxl), q.invT)), b1);
    } else if (b1 >= 0) {
      for (int b = lane; b < nb; b += 32) {
        const float m1 = __ldcg(&recs[b].maxl);
        if (m1 != neg_inf()) argmax_merge(best, bbest, exact_score(b, xform(m1, q.invT)), b);
      }
    }
  } else {
    for (int b = lane; b < nb; b += 32) {
      const float ma = block_sum(b);
      if (need_a && __ldcg(&recs[b].maxl) != neg_inf()) argmax_merge(best, bbest, exact_score(b, ma), b);
    }
  }
  Za = warp_sumd(Za);
  Ea = warp_sumd(Ea);
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
  int token = amax;
  float lt = Ml;  // l of the token (greedy: the argmax)
  if (need_a) {
    warp_argmax(best, bbest);
    // Token within the winning block: approximate Gumbels for all of its columns (loaded as the
    // pass loads a block: 16-byte loads where the row allows), exact float64 scores for the
    // candidates within the approximation margin of the best (a bit mask: no indexed array).
    float sf[32];
    load_block_l<DT, true>(P, q, row, bbest, lane, sf);
    float bf = neg_inf();
#pragma unroll 4
    for (int e = 0; e < 32; ++e) {
      float v = neg_inf();
      if (sf[e] != neg_inf())
        v = xform(sf[e], q.invT) +
            approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)col_of<DT>(bbest, lane, e), kSaltToken));
      sf[e] = v;
      bf = fmaxf(bf, v);
    }
    bf = warp_max(bf);
    const float thr = bf - approx_margin(bf);
    unsigned cand = 0;
#pragma unroll
    for (int e = 0; e < 32; ++e)  // (thr may round to -inf at |a| ~ FLT_MAX: -inf stays out)
      if (sf[e] != neg_inf() && sf[e] >= thr) cand |= 1u << e;
    double bv = 0;
    int bt = INT_MAX;
    float bl = 0.f;
    while (cand) {
      const int e = __ffs(cand) - 1;
      cand &= cand - 1;
      const int col = col_of<DT>(bbest, lane, e);
      const float l = load_l<DT>(P, q, row, col);
      const double v = (double)xform(l, q.invT) + gumbel(q.seed, q.step, pos, (uint32_t)col, kSaltToken);
      const int bt0 = bt;
      argmax_merge(bv, bt, v, col);
      if (bt != bt0) bl = l;
    }
    const int mine = bt;
    warp_argmax(bv, bt);
    const unsigned own = __ballot_sync(0xffffffffu, mine == bt && bt != INT_MAX);
    if (own) bl = __shfl_sync(0xffffffffu, bl, __ffs(own) - 1);
    token = bt;
    lt = bl;
  }
  if (lane != 0) return;
  plain_outputs<DT>(P, q, row, t, Ml, Ma, amax, token, Za, Ea, Zl, El, lt);
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32, 4) plain_finish_warp_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  const int lane = threadIdx.x & 31;
  const long long row_ll = (long long)blockIdx.x * kRowWarps + (threadIdx.x >> 5);
  if (row_ll >= P.num_rows) return;
  const int row = (int)row_ll;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (is_filtered(q, P.V)) return;
  finish_plain_warp<DT>(P, q, row, lane);
}

// A block's record from its maximum M (finite or -inf) and its 32 values per lane, get(e) = the
// lane's e-th value (l after docs §2). The same arithmetic for every source of values.
// N: values per lane (32; fewer for small_plain_kernel's short last block, whose other values
// would all be -inf: their terms are exact zeros, so the sums are the same bits).
template <int N = 32, class G>
__device__ __forceinline__ BlockRec block_sums(const SampleParams& P, const Req& q, float M, const G& get) {
  BlockRec rec;
  rec.maxl = M;
  rec.second = neg_inf();
  rec.amax = INT_MAX;
  rec.sa = rec.ea = rec.sl = rec.el = 0.f;
  rec.pad = 0;
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  if (M != neg_inf()) {
    const bool want_e = P.want_stats && !P.stats_guided;
    if (!q.greedy && q.invT == 1.f) {
      // a == l: one exp pass serves sampling and both statistics modes.
      float s = 0.f, en = 0.f;
      if (want_e || P.stats_guided) {
#pragma unroll
        for (int e = 0; e < N; ++e) {
          const float d = fmaxf((get(e) - M) * kLog2e, -1000.f);
          const float x = ex2(d);
          s += x;
          en = fmaf(x, d, en);
        }
        en = warp_sum(en) * kLn2;
      } else {
#pragma unroll
        for (int e = 0; e < N; ++e) s += ex2((get(e) - M) * kLog2e);
      }
      s = warp_sum(s);
      rec.sa = s;
      rec.ea = en;
      rec.sl = s;
      rec.el = en;
    } else {
      if (!q.greedy) {
        const float ma = xform(M, q.invT);
        const float invT = q.invT;
        float s = 0.f, en = 0.f;
        if (want_e) {
#pragma unroll
          for (int e = 0; e < N; ++e) {
            const float d = fmaxf((xform(get(e), invT) - ma) * kLog2e, -1000.f);
            const float x = ex2(d);
            s += x;
            en = fmaf(x, d, en);
          }
          rec.ea = warp_sum(en) * kLn2;
        } else {
#pragma unroll
          for (int e = 0; e < N; ++e) s += ex2((xform(get(e), invT) - ma) * kLog2e);
        }
        rec.sa = warp_sum(s);
      }
      if (P.want_stats && P.stats_guided) {
        float s = 0.f, en = 0.f;
#pragma unroll
        for (int e = 0; e < N; ++e) {
          const float d = fmaxf((get(e) - M) * kLog2e, -1000.f);
          const float x = ex2(d);
          s += x;
          en = fmaf(x, d, en);
        }
        rec.sl = warp_sum(s);
        rec.el = warp_sum(en) * kLn2;
      }
    }
  }
  return rec;
}

// FUSED: the row's last warp also finishes it (P.fuse_finish; 64 registers so that 32 warps
// per SM stay resident while the finishes run: 4096 x 1025 is one wave).
template <int DT, bool FUSED>
__global__ void __launch_bounds__(kRowWarps * 32, FUSED ? 4 : 3) plain_pass_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  constexpr int PFN = 4;  // 16-byte loads of the next block issued before this block's arithmetic
  const int lane = threadIdx.x & 31;
  const int wpr = (P.nblocks + P.bpw - 1) / P.bpw;  // warps per row
  const long long gw = (long long)blockIdx.x * kRowWarps + (threadIdx.x >> 5);
  const long long total = (long long)P.num_rows * wpr;
  if (gw >= total) return;
  int row, wi;
  if (total <= 0x7fffffffLL) {  // 32-bit division (the 64-bit one is a call of ~100 instructions)
    row = (int)((unsigned)gw / (unsigned)wpr);
    wi = (int)gw - row * wpr;
  } else {
    row = (int)(gw / wpr);
    wi = (int)(gw - (long long)row * wpr);
  }
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  // Device row_offsets that are not monotone can map a row outside its request's range: such a
  // row is never guided, so no uncond row outside [0, uncond_num_rows) is ever read.
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (is_filtered(q, P.V)) return;
  const int b0 = wi * P.bpw, b1 = min(b0 + P.bpw, P.nblocks);
  // Unguided 16-byte-aligned rows: the next block's first PFN loads are in flight while this
  // block's arithmetic runs (a warp's blocks are consecutive blocks of one row).
  const bool fastrow = P.vec_ok != 0 && !q.guided;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  uint4 pre[PFN];
  auto prefetch = [&](int b) {
#pragma unroll
    for (int j = 0; j < PFN; ++j)
      pre[j] = *reinterpret_cast<const uint4*>(crow + b * kB + j * 32 * VEC + lane * VEC);
  };
  if (fastrow && (b0 + 1) * kB <= P.V) prefetch(b0);
  for (int blk = b0; blk < b1; ++blk) {
  float lv[32];
  float M = 0.f;
  bool have = false;  // rec already computed (16-bit fast path)
  BlockRec rec;
  if (fastrow && (blk + 1) * kB <= P.V) {
    uint4 cr[NJ];
#pragma unroll
    for (int j = 0; j < NJ; ++j)
      cr[j] = j < PFN ? pre[j]
                      : *reinterpret_cast<const uint4*>(crow + blk * kB + j * 32 * VEC + lane * VEC);
    if (blk + 1 < b1 && (blk + 2) * kB <= P.V) prefetch(blk + 1);
    const int bo = P.banned - blk * kB;
    const bool ban_here = bo >= 0 && bo < kB && ((bo / VEC) & 31) == lane;
    const int ban_idx = (bo / (32 * VEC)) * VEC + (bo % VEC);
    if constexpr (DT != 0) {
      // bf16 / f16: the values stay packed (16 registers): maximum on pairs with NaN propagation,
      // each value converted once, in the exp pass.
      uint32_t w[16];
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        w[j * 4 + 0] = cr[j].x;
        w[j * 4 + 1] = cr[j].y;
        w[j * 4 + 2] = cr[j].z;
        w[j * 4 + 3] = cr[j].w;
      }
      if (ban_here) {
        constexpr uint32_t kNeg = DT == 1 ? 0xff80u : 0xfc00u;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          if (2 * i == ban_idx) w[i] = (w[i] & 0xffff0000u) | kNeg;
          if (2 * i + 1 == ban_idx) w[i] = (w[i] & 0xffffu) | (kNeg << 16);
        }
      }
      uint32_t pm = w[0];
#pragma unroll
      for (int i = 1; i < 16; ++i) pm = pmax_nan<DT>(pm, w[i]);
      const float m1 = fmax_nan(Elt<DT>::cvt((uint16_t)(pm & 0xffffu)), Elt<DT>::cvt((uint16_t)(pm >> 16)));
      M = warp_max_nan(m1);
      if (!(M != M || M == -neg_inf())) {
        rec = block_sums(P, q, M, [&](int e) {
          return Elt<DT>::cvt((uint16_t)((e & 1) ? (w[e >> 1] >> 16) : (w[e >> 1] & 0xffffu)));
        });
        have = true;
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e)
          lv[e] = Elt<DT>::cvt((uint16_t)((e & 1) ? (w[e >> 1] >> 16) : (w[e >> 1] & 0xffffu)));
      }
    } else {
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const T* ce = reinterpret_cast<const T*>(&cr[j]);
#pragma unroll
        for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = Elt<DT>::cvt(ce[e]);
      }
      if (ban_here) {
#pragma unroll
        for (int e = 0; e < 32; ++e)
          if (e == ban_idx) lv[e] = neg_inf();
      }
    }
  } else {
    load_block_l<DT, false>(P, q, row, blk, lane, lv);
  }
  if (!have) {
    // The block as loaded, its maximum with NaN propagation. A NaN or +inf anywhere (M NaN or
    // +inf) takes the exact rule (docs §2: NaN -> -inf, +inf -> FLT_MAX) in place; otherwise the
    // values already are l (a block of only -inf included) and every sum is unchanged.
    // The argmax, the runner-up and their columns are not found here: the finish re-reads the
    // one block that holds the row's maximum (plain_finish_kernel).
    float m1 = lv[0];
#pragma unroll
    for (int e = 1; e < 32; ++e) m1 = fmax_nan(m1, lv[e]);
    M = warp_max_nan(m1);
    if (M != M || M == -neg_inf()) {
      // (sanitize_fast in place is exactly what load_block_l<DT, true> would have produced)
      m1 = neg_inf();
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        lv[e] = sanitize_fast(lv[e]);
        m1 = fmaxf(m1, lv[e]);
      }
      M = warp_max(m1);
    }
    rec = block_sums(P, q, M, [&](int e) { return lv[e]; });
  }
  if (lane == 0) P.recs[(long long)row * P.nblocks + blk] = rec;
  }  // blocks of this warp
  if constexpr (!FUSED) return;
  // The last warp of the row to finish its blocks finishes the row (its finish overlaps the
  // other rows' streaming instead of waiting for a second launch). Lane 0 wrote the records:
  // fence, count; the warp that sees wpr - 1 fences again and reads every record (__ldcg, L2).
  if (wpr > 1) {
    int last = 0;
    if (lane == 0) {
      __threadfence();
      last = atomicAdd(&P.counters[row], 1) == wpr - 1;
    }
    last = __shfl_sync(0xffffffffu, last, 0);
    if (!last) return;
    __threadfence();
  } else {
    __syncwarp();
  }
  finish_plain_warp<DT>(P, q, row, lane);
}

// ------------------------------------------------------------------------------------------------
// small_plain_kernel: unfiltered rows of V <= 2048 (one or two 1024-token blocks; OmniVoice-style
// 1025 is one block and one column), one warp per row (or, for few rows, a CTA per row whose
// warps share the token pass), the row in registers: no block records, no re-reads of the
// maximum's block, one launch. The same arithmetic as plain_pass_kernel
// + a finish (block_sums on the same column layout, add_rec_terms in the warp finish's order, the
// block and token scores of finish_plain_warp), so every output is the same bits whichever path
// runs (DDS_SAMPLE_SMALL=0 selects the general path for A/B runs).
// NT: 16-byte groups per lane held for block 1: 0 (V <= 1024), 1 (a last block of at most
// 32 * VEC columns: only group 0 exists), NJ (any last block).
template <int DT>
__host__ __device__ constexpr int small_groups_for(int V) {
  return V <= kB ? 0 : (V - kB <= 32 * Elt<DT>::VEC ? 1 : 32 / Elt<DT>::VEC);
}

// Groups [0, NG) of block `blk` of the row as l (docs §2: guidance, banned column, NaN -> -inf,
// +inf -> FLT_MAX): lane holds column blk*1024 + j*32*VEC + lane*VEC + q at lv[j*VEC + q], columns
// >= V as -inf. Unguided rows load raw values (16-byte loads where the row allows) and sanitise
// only when a NaN-propagating maximum shows a NaN or +inf; returns the block maximum.
template <int DT, int NG>
__device__ __forceinline__ float small_load(const SampleParams& P, const Req& q, int row, int blk,
                                            int lane, float (&lv)[NG * Elt<DT>::VEC]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int N = NG * VEC;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const bool vec = P.vec_ok != 0;
  if (!q.guided) {
#pragma unroll
    for (int j = 0; j < NG; ++j) load_vec<DT>(crow, blk * kB + j * 32 * VEC + lane * VEC, P.V, vec, &lv[j * VEC]);
  } else {
    const T* urow = reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride;
#pragma unroll
    for (int j = 0; j < NG; ++j) {
      float u[VEC];
      const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
      load_vec<DT>(crow, c0, P.V, vec, &lv[j * VEC]);
      load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) lv[j * VEC + e] = make_l_nb(lv[j * VEC + e], u[e], true, q.g);
    }
  }
  // The banned column, if this lane holds it (unrolled: no local memory).
  const int bo = P.banned - blk * kB;
  if (bo >= 0 && bo < NG * 32 * VEC && ((bo / VEC) & 31) == lane) {
    const int idx = (bo / (32 * VEC)) * VEC + (bo % VEC);
#pragma unroll
    for (int e = 0; e < N; ++e)
      if (e == idx) lv[e] = neg_inf();
  }
  float m = lv[0];
#pragma unroll
  for (int e = 1; e < N; ++e) m = fmax_nan(m, lv[e]);
  float M = warp_max_nan(m);
  if (M != M || M == -neg_inf()) {  // (unguided rows only: make_l_nb sanitised guided ones)
    m = neg_inf();
#pragma unroll
    for (int e = 0; e < N; ++e) {
      lv[e] = sanitize_fast(lv[e]);
      m = fmaxf(m, lv[e]);
    }
    M = warp_max(m);
  }
  return M;
}

// The lane's first column holding the block maximum M and the block's runner-up (multiset), as
// block_top2 finds them, reduced over the warp.
template <int DT, int N>
__device__ __forceinline__ Top2 small_top2(const float (&lv)[N], int blk, float M, int lane) {
  float b1 = neg_inf(), b2 = neg_inf();
#pragma unroll
  for (int e = 0; e < N; ++e) {
    b2 = fmaxf(b2, fminf(b1, lv[e]));
    b1 = fmaxf(b1, lv[e]);
  }
  int am = INT_MAX;
  if (b1 == M) {
#pragma unroll
    for (int e = N - 1; e >= 0; --e)
      if (lv[e] == M) am = col_of<DT>(blk, lane, e);
  }
  return warp_top2(Top2{b1, am, b2});
}

// Row maximum (the larger of the blocks' maxima M0 / M1), its first column, the multiset
// runner-up (finish_plain_warp's Top2), from the registers of small_load (NT: as
// small_plain_kernel).
template <int DT, int NT, int N1>
__device__ __forceinline__ Top2 small_row_top2(const float (&l0)[32], const float (&l1)[N1],
                                               float M0, float M1, int lane) {
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  const bool max1 = NT > 0 && M1 > M0;  // the first block holding the maximum
  if (max1) {
    if constexpr (NT > 0) t = small_top2<DT, N1>(l1, 1, M1, lane);
    t.m2 = fmaxf(t.m2, M0);
  } else {
    t = small_top2<DT, 32>(l0, 0, M0, lane);
    if (NT > 0) t.m2 = fmaxf(t.m2, M1);
  }
  t.m1 = max1 ? M1 : M0;
  return t;
}

// Group j of block `blk` as l again (the token pass re-reads it: L1 / L2), the same values
// small_load produced: sanitize_fast is the identity on values that needed no sanitising.
template <int DT>
__device__ __forceinline__ void small_group(const SampleParams& P, const Req& q, int row, int blk,
                                            int j, int lane, float (&l)[Elt<DT>::VEC]) {
  using T = typename Elt<DT>::T;
  constexpr int VEC = Elt<DT>::VEC;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
  const bool vec = P.vec_ok != 0;
  load_vec<DT>(crow, c0, P.V, vec, l);
  if (q.guided) {
    const T* urow = reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride;
    float u[VEC];
    load_vec<DT>(urow, c0, P.V, vec, u);
#pragma unroll
    for (int e = 0; e < VEC; ++e) l[e] = make_l_nb(l[e], u[e], true, q.g);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) l[e] = sanitize_fast(l[e]);
  }
  const int bo = P.banned - c0;
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (bo == e) l[e] = neg_inf();
}

// The token within block `blk` (NG 16-byte groups per lane): approximate Gumbels for every
// column, each lane keeping its best two; the exact float64 score for a lane's best when it lies
// within approx_margin of the warp's best, for all of a lane's columns in that range when its
// second does too (rare). The same candidates as finish_plain_warp's bit mask, so the same
// token. Returns the token (warp-uniform) and its l in *lt.
// A rolled loop over the groups, each re-read (L1): unrolled over registers holding the row, its
// ~45 KB of code missed the instruction cache (ncu, 8 x 1025: 9.5 of 14 cycles per instruction
// "no instruction") and the row's 32 registers spilled.
// CTA (small_plain_kernel<.., true>: kRowWarps warps on one row): warp w takes groups w, w + 8,
// ...; the best score, then the exact argmax, are merged across the warps through `sm` (the same
// threshold and candidates, so the same token).
struct SmallSmem {
  int bb;
  float bf[kRowWarps];
  double bv[kRowWarps];
  int bt[kRowWarps];
  float bl[kRowWarps];
};
template <int DT, int NG, bool CTA = false>
__device__ __forceinline__ int small_token(const SampleParams& P, const Req& q, int row, int blk,
                                           uint32_t pos, int lane, float* lt, SmallSmem* sm = nullptr) {
  constexpr int VEC = Elt<DT>::VEC;
  const int wid = CTA ? (int)(threadIdx.x >> 5) : 0;
  constexpr int JS = CTA ? kRowWarps : 1;  // group stride
  Best2 bs{neg_inf(), neg_inf()};
  float l1 = 0.f;
  int c1 = -1;
  auto approx = [&](float l, int col) {
    return xform(l, q.invT) + approx_gumbel(random_bits(q.seed, q.step, pos, (uint32_t)col, kSaltToken));
  };
  auto group = [&](const float (&l)[VEC], int c0) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (l[e] == neg_inf()) continue;
      if (bs.add(approx(l[e], c0 + e))) {
        c1 = c0 + e;
        l1 = l[e];
      }
    }
  };
  if (!q.guided && P.vec_ok && (blk + 1) * kB <= P.V) {
    // Unguided whole block, 16-byte aligned rows: one 16-byte load per group.
    using T = typename Elt<DT>::T;
    const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
#pragma unroll 1
    for (int j = wid; j < NG; j += JS) {
      const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
      const uint4 raw = *reinterpret_cast<const uint4*>(crow + c0);
      const T* ce = reinterpret_cast<const T*>(&raw);
      float l[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) l[e] = (P.banned - c0 == e) ? neg_inf() : sanitize_fast(Elt<DT>::cvt(ce[e]));
      group(l, c0);
    }
  } else {
#pragma unroll 1
    for (int j = wid; j < NG; j += JS) {
      float l[VEC];
      small_group<DT>(P, q, row, blk, j, lane, l);
      group(l, blk * kB + j * 32 * VEC + lane * VEC);
    }
  }
  const float v1 = bs.s1, v2 = bs.s2;
  float bf = warp_max(v1);
  if constexpr (CTA) {
    if (lane == 0) sm->bf[wid] = bf;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kRowWarps; ++w) bf = fmaxf(bf, sm->bf[w]);
  }
  float thr = bf - approx_margin(bf);  // (may round to -inf at |a| ~ FLT_MAX: -inf stays out)
  if (P.small_exact_all) thr = -FLT_MAX;
  double bv = 0;
  int bt = INT_MAX;
  float bl = 0.f;
  auto exact = [&](int col, float l) {
    const double v = (double)xform(l, q.invT) + gumbel(q.seed, q.step, pos, (uint32_t)col, kSaltToken);
    const int bt0 = bt;
    argmax_merge(bv, bt, v, col);
    if (bt != bt0) bl = l;
  };
  if (v2 != neg_inf() && v2 >= thr) {
#pragma unroll 1
    for (int j = wid; j < NG; j += JS) {
      float l[VEC];
      small_group<DT>(P, q, row, blk, j, lane, l);
      const int c0 = blk * kB + j * 32 * VEC + lane * VEC;
#pragma unroll 1
      for (int e = 0; e < VEC; ++e) {
        float le = l[0];
#pragma unroll
        for (int k = 1; k < VEC; ++k)
          if (k == e) le = l[k];
        if (le != neg_inf() && approx(le, c0 + e) >= thr) exact(c0 + e, le);
      }
    }
  } else if (c1 >= 0 && v1 >= thr) {
    exact(c1, l1);
  }
  const int mine = bt;
  warp_argmax(bv, bt);
  const unsigned own = __ballot_sync(0xffffffffu, mine == bt && bt != INT_MAX);
  if (own) bl = __shfl_sync(0xffffffffu, bl, __ffs(own) - 1);
  if constexpr (CTA) {
    if (lane == 0) {
      sm->bv[wid] = bv;
      sm->bt[wid] = bt;
      sm->bl[wid] = bl;
    }
    __syncthreads();
    bv = 0;
    bt = INT_MAX;
    for (int w = 0; w < kRowWarps; ++w) {
      const int bt0 = bt;
      argmax_merge(bv, bt, sm->bv[w], sm->bt[w]);
      if (bt != bt0) bl = sm->bl[w];
    }
  }
  *lt = bl;
  return bt;
}

// CTA = true (few rows, small_cta_default): one CTA per row; warp 0 does everything but the
// token pass, which all kRowWarps warps share (small_token): a shorter chain per row, the same
// arithmetic, so the same bits as the warp per row.
template <int DT, int NT, bool CTA>
// Register caps: the warp form 64 (4 CTAs of 256 threads per SM) for rows of one block and a
// short tail (80 measured no faster, docs/device-runs.md), 128 with a whole second block; the CTA
// form 128.
__global__ void __launch_bounds__(kRowWarps * 32, CTA ? 2 : (NT <= 1 ? 4 : 2)) small_plain_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  constexpr int N1 = NT > 0 ? NT * VEC : 1;
  const int lane = threadIdx.x & 31;
  const int wid = threadIdx.x >> 5;
  __shared__ SmallSmem sm;
  const long long row_ll = CTA ? (long long)blockIdx.x : (long long)blockIdx.x * kRowWarps + wid;
  if (row_ll >= P.num_rows) return;
  const int row = (int)row_ll;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (is_filtered(q, P.V)) return;  // (CTA: the whole CTA, one row)
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : row - q.row_begin);
  const bool need_a = !q.greedy;
  // Warp 0 (every warp of the warp-per-row form): the row in registers, block sums, maximum,
  // runner-up, winning block bb (-1: no token pass, greedy; -2: empty row).
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  float Ml = neg_inf(), Ma = 0.f;
  BlockRec rmine{};
  int bb = -1;
  if (!CTA || wid == 0) {
    float l0[32], l1[N1];
    const float M0 = small_load<DT, NJ>(P, q, row, 0, lane, l0);
    float M1 = neg_inf();
    if constexpr (NT > 0) M1 = small_load<DT, NT>(P, q, row, 1, lane, l1);
    const BlockRec r0 = block_sums(P, q, M0, [&](int e) { return l0[e]; });
    BlockRec r1 = r0;
    if constexpr (NT > 0) r1 = block_sums<N1>(P, q, M1, [&](int e) { return l1[e]; });
    t = small_row_top2<DT, NT>(l0, l1, M0, M1, lane);
    Ml = t.m1;
    if (Ml == neg_inf()) {
      if (lane == 0) write_empty(P, row);
      bb = -2;
    } else {
      Ma = need_a ? xform(Ml, q.invT) : 0.f;
      // Lane b keeps block b's record for the sums (added after the token: fewer live registers).
      rmine = lane == 0 ? r0 : r1;
      if (need_a) {
        // The winning block: with two non-empty blocks, both exact float64 scores (lanes 0 and
        // 1), ties to the lower block; else the one non-empty block.
        bb = M0 != neg_inf() ? 0 : 1;
        if (NT > 0 && M0 != neg_inf() && M1 != neg_inf()) {
          double sc = 0;
          if (lane < 2) {
            const BlockRec rb = lane == 0 ? r0 : r1;
            sc = ((double)xform(rb.maxl, q.invT) + log((double)rb.sa)) +
                 gumbel(q.seed, q.step, pos, (uint32_t)lane, kSaltBlock);
          }
          const double s1 = __shfl_sync(0xffffffffu, sc, 1);
          const double s0 = __shfl_sync(0xffffffffu, sc, 0);
          bb = s1 > s0 ? 1 : 0;
        }
      }
    }
  }
  if constexpr (CTA) {  // every warp passes the same barriers
    if (wid == 0 && lane == 0) sm.bb = bb;
    __syncthreads();
    bb = sm.bb;
  }
  if (bb == -2) return;
  const int amax = t.i1;
  int token = amax;
  float lt = Ml;
  if (bb == 0) token = small_token<DT, NJ, CTA>(P, q, row, 0, pos, lane, &lt, &sm);
  else if (bb == 1) {
    if constexpr (NT > 0) token = small_token<DT, NT, CTA>(P, q, row, 1, pos, lane, &lt, &sm);
  }
  if (CTA && wid != 0) return;
  // Sums in the warp finish's order: lane b adds block b's terms, then warp_sumd.
  double Za = 0, Ea = 0, Zl = 0, El = 0;
  if (lane == 0 || (NT > 0 && lane == 1))
    add_rec_terms(RecReg{rmine}, need_a, P.stats_guided != 0, q.invT, Ma, Ml, Za, Ea, Zl, El);
  Za = warp_sumd(Za);
  Ea = warp_sumd(Ea);
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
  if (lane != 0) return;
#if defined(__CUDA_ARCH__)
  __builtin_assume(lt == lt);  // (l is never NaN: plain_outputs need not re-read it)
#endif
  plain_outputs<DT>(P, q, row, t, Ml, Ma, amax, token, Za, Ea, Zl, El, lt);
}

// Filtered rows of V <= 2048 (one block, or one block and a tail; NT as small_plain_kernel): one
// warp per row, in one launch, instead of row_pass_kernel's candidate list (the whole row: 8 KB
// of list writes per row) and cand_finish_kernel's second launch. The warp loads the row
// (small_load), takes its maximum, first argmax column and runner-up from the registers, and
// stores the order-preserving keys of a = l / T in its part of shared memory; then what
// finish_filtered does on its list S runs on those keys, every finite column of the row being S
// (complete): the thresholds (filter_thresholds: a radix select whose last two passes walk a list
// of the columns inside the first digit's bin, fixed-point top-p masses), the kept set listed once
// (the row's candidate area), its sums (integers, so any order gives the same bits) and the two
// block scores, then the token among the winning block's kept columns (list_token: no Philox draw
// for a column not kept). The decisions and sums are finish_filtered's on a complete list, so the
// outputs are its bits (DDS_SAMPLE_SMALL_FILTER=0 selects the general path for A/B runs). The
// choice depends on V only, so batch invariance holds whatever the order of the guided sums
// (block_sums', the same arithmetic as row_pass_kernel's).
constexpr int kSmallFiltWarps = 4;  // rows per CTA (static shared memory < 48 KB at NT = all)
// CTA = true (few rows, small_filter_cta_default): one row per CTA of kRowWarps
// warps; warp 0 loads the row and writes the outputs, the selects, the kept list, its sums and the
// token search are shared by the warps (CtaTeam). The same decisions and integer sums, so the
// same bits as the warp per row.
template <int DT, int NT, bool CTA>
struct SmallFiltSmem {
  static constexpr int kCols = kB + NT * 32 * Elt<DT>::VEC;  // columns held (>= V)
  static constexpr int kRows = CTA ? 1 : kSmallFiltWarps;
  unsigned bins[kRows][kWBins * 3];  // 256 counts + 256 u64 masses
  uint32_t key[kRows][kCols];        // fkey(a); 0 for -inf
  unsigned lcnt[kRows];
  TeamSmem team;
  Top2 t;
  int nfin, empty;
  float amin;
};
template <int DT, int NT, bool CTA>
__global__ void __launch_bounds__(CTA ? kRowWarps * 32 : kSmallFiltWarps * 32, CTA ? 2 : (NT <= 1 ? 7 : 5)) small_filter_kernel(const __grid_constant__ SampleParams P) {
  pdl_sync();
  constexpr int VEC = Elt<DT>::VEC;
  constexpr int NJ = 32 / VEC;
  constexpr int N1 = NT > 0 ? NT * VEC : 1;
  constexpr uint32_t kFinite = 0x00800000u;  // keys of finite a are >= fkey(-FLT_MAX)
  using Team = typename std::conditional<CTA, CtaTeam, WarpTeam>::type;
  __shared__ __align__(16) SmallFiltSmem<DT, NT, CTA> sm;
  const int lane = threadIdx.x & 31;
  const int wid = threadIdx.x >> 5;
  const int slot = CTA ? 0 : wid;  // this row's part of sm
  Team team;
  team.lane = lane;
  if constexpr (CTA) team.sm = &sm.team;
  const long long row_ll = CTA ? (long long)blockIdx.x : (long long)blockIdx.x * kSmallFiltWarps + wid;
  if (row_ll >= P.num_rows) return;  // (CTA: the whole CTA)
  const int row = (int)row_ll;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (!is_filtered(q, P.V)) return;  // (CTA: the whole CTA, one row)
  const int V = P.V;
  const float invT = q.invT;
  uint32_t* skey = sm.key[slot];
  unsigned* hist = sm.bins[slot];
  unsigned long long* hm = reinterpret_cast<unsigned long long*>(sm.bins[slot] + kWBins);
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  double Zl = 0, El = 0;
  int nfin = 0;
  bool empty = false;
  if (!CTA || wid == 0) {
    float l0[32], l1[N1];
    const float M0 = small_load<DT, NJ>(P, q, row, 0, lane, l0);
    float M1 = neg_inf();
    if constexpr (NT > 0) M1 = small_load<DT, NT>(P, q, row, 1, lane, l1);
    t = small_row_top2<DT, NT>(l0, l1, M0, M1, lane);
    empty = t.m1 == neg_inf();
    if (empty) {
      if (lane == 0) write_empty(P, row);
    } else {
      if (P.stats_guided) {
        // Guided statistics over K0: the blocks' l-sums (block_sums with the a-sums off), added
        // in finish_filtered's order (lane b: block b).
        Req qg = q;
        qg.greedy = true;
        const BlockRec r0 = block_sums(P, qg, M0, [&](int e) { return l0[e]; });
        BlockRec rb = r0;
        if constexpr (NT > 0) {
          const BlockRec r1 = block_sums<N1>(P, qg, M1, [&](int e) { return l1[e]; });
          if (lane == 1) rb = r1;
        }
        if ((lane == 0 || (NT > 0 && lane == 1)) && rb.maxl != neg_inf())
          guided_terms(rb.maxl, rb.sl, rb.el, t.m1, Zl, El);
        Zl = warp_sumd(Zl);
        El = warp_sumd(El);
      }
      // The keys into shared memory, column-indexed (16-byte stores; columns >= V: -inf, key 0).
      auto key_of = [&](float l) {
        nfin += l != neg_inf() ? 1 : 0;
        return l != neg_inf() ? fkey(xform(l, invT)) : 0u;
      };
#pragma unroll
      for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < VEC; e += 4)
          *reinterpret_cast<uint4*>(skey + j * 32 * VEC + lane * VEC + e) =
              make_uint4(key_of(l0[j * VEC + e]), key_of(l0[j * VEC + e + 1]),
                         key_of(l0[j * VEC + e + 2]), key_of(l0[j * VEC + e + 3]));
      if constexpr (NT > 0) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < VEC; e += 4)
            *reinterpret_cast<uint4*>(skey + kB + j * 32 * VEC + lane * VEC + e) =
                make_uint4(key_of(l1[j * VEC + e]), key_of(l1[j * VEC + e + 1]),
                           key_of(l1[j * VEC + e + 2]), key_of(l1[j * VEC + e + 3]));
      }
      nfin = warp_sumi(nfin);
    }
  }
  float amin = neg_inf();
  float m = 0.f;
  if (!empty && (!CTA || wid == 0)) {
    m = xform(t.m1, invT);
    if (q.minp > 0.f) {
      float x = 0.f;
      if (lane == 0) x = minp_threshold(m, (double)m, q.minp);
      amin = __shfl_sync(0xffffffffu, x, 0);
    }
  }
  if constexpr (CTA) {  // warp 0's results to the CTA
    if (wid == 0 && lane == 0) {
      sm.t = t;
      sm.nfin = nfin;
      sm.empty = empty ? 1 : 0;
      sm.amin = amin;
    }
    __syncthreads();
    t = sm.t;
    nfin = sm.nfin;
    empty = sm.empty != 0;
    amin = sm.amin;
    m = xform(t.m1, invT);
  } else {
    __syncwarp();
  }
  if (empty) return;
  const float Ml = t.m1;
  const double md = (double)m;
  // The source: every finite column of the row (finish_filtered's S when its lists are complete).
  auto each = [&](auto g) {
#pragma unroll 4
    for (int c = team.rank(); c < V; c += Team::kSize) {
      const uint32_t key = skey[c];
      if (key >= kFinite) g(c, fkey_inv(key), key);
    }
  };
  // The row's candidate area (nblocks x cand_cap >= V entries): the select's list, then the
  // kept columns.
  int2* cl = P.cand + (long long)row * P.nblocks * P.cand_cap;
  // Complete source: nothing lies outside it, so ok and inside always hold (top-k: k < nfin, or
  // top-k is off; top-p: its boundary lies in the source, whose mass is the row's).
  const FiltThr th = filter_thresholds(team, P, q, each, nfin, true, m, md, amin, neg_inf(), hist,
                                       hm, []() { return 0.0; }, cl, &sm.lcnt[slot]);
  const Kept in_k{th.kthr, th.cid, amin};
  // The kept columns as a list (c, a): in_k on the keys (a >= amin iff key >= fkey(amin), fkey
  // being order-preserving, with amin = 0 taken as -0.0, the lower key of the two zeros; -inf
  // columns hold key 0). A warp appends its 32-column chunks in column order; the warps' chunks
  // interleave (the list is a set to every use below).
  const uint32_t kmin = max(kFinite, fkey(amin == 0.f ? -0.0f : amin));
  const uint32_t kthr = th.kthr;
  const int cid = th.cid;
  unsigned* lcnt = &sm.lcnt[slot];
  if (CTA && team.rank() == 0) *lcnt = 0u;
  team.sync();
  int nl = 0;  // (warp form: the running count; CTA form: a shared counter per chunk)
  for (int c0 = 32 * team.warp(); c0 < V; c0 += Team::kSize) {
    const int c = c0 + lane;
    const uint32_t key = c < V ? skey[c] : 0u;
    const bool in = (key >= kmin) & ((key > kthr) | ((key == kthr) & (c <= cid)));
    const unsigned bal = __ballot_sync(0xffffffffu, in);
    unsigned base = (unsigned)nl;
    if constexpr (CTA) {
      if (bal == 0u) continue;
      if (lane == 0) base = atomicAdd(lcnt, (unsigned)__popc(bal));
      base = __shfl_sync(0xffffffffu, base, 0);
    } else {
      nl += __popc(bal);
    }
    if (in) cl[base + __popc(bal & ((1u << lane) - 1u))] = make_int2(c, __float_as_int(fkey_inv(key)));
  }
  team.sync();
  __threadfence();
  if constexpr (CTA) nl = (int)*lcnt;
  // Kept sums, per block (the block scores' masses) and in all (integers: any order).
  unsigned long long z0 = 0, z1 = 0;
  long long ef = 0;
  for_list(cl, nl, lane, [&](int c, float a) {
    const unsigned long long ux = kept_terms(a, md, ef);
    if (c < kB) z0 += ux;
    else z1 += ux;
  }, 128 * team.warp() + lane, 128 * (Team::kSize / 32));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    z0 += __shfl_xor_sync(0xffffffffu, z0, o);
    z1 += __shfl_xor_sync(0xffffffffu, z1, o);
    ef += __shfl_xor_sync(0xffffffffu, ef, o);
  }
  if constexpr (CTA) {
    TeamSmem& ts = sm.team;
    if (lane == 0) {
      ts.wz[0][wid] = z0;
      ts.wz[1][wid] = z1;
      ts.wz[2][wid] = (unsigned long long)ef;
    }
    __syncthreads();
    z0 = z1 = 0;
    unsigned long long e2 = 0;
    for (int u = 0; u < kRowWarps; ++u) {
      z0 += ts.wz[0][u];
      z1 += ts.wz[1][u];
      e2 += ts.wz[2][u];
    }
    ef = (long long)e2;
  }
  // The winning block (float64 scores, finish_filtered's), lane b scoring block b (every warp
  // alike).
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : row - q.row_begin);
  double best = 0;
  int bbest = INT_MAX;
  const unsigned long long zb = lane == 0 ? z0 : z1;
  if (lane < P.nblocks && zb != 0ull) {
    const double score = (md + log((double)zb / kMassScale)) +
                         gumbel(q.seed, q.step, pos, (uint32_t)lane, kSaltBlock);
    argmax_merge(best, bbest, score, lane);
  }
  warp_argmax(best, bbest);
  const int bt = list_token(team, q, pos, cl, nl, bbest, in_k, [](float a) { return a; });
  const int token = (bt == INT_MAX) ? t.i1 : bt;
  if (team.rank() == 0)
    filtered_outputs<DT>(P, q, row, token, t.i1, t.m2, Ml, m, th.kthr, th.cid, amin,
                         z0 + z1, ef, nl, Zl, El);
}

// ------------------------------------------------------------------------------------------------
// Filtered rows: one CTA per row.
constexpr int kCandCap = 4096;  // candidate list of the filter kernel (ids + l values)
// Rows longer than kSmemRowMax are not held in shared memory: that space then holds a longer list
// (the boundary digit's columns of a wide top-p nucleus), ids then l values.
constexpr int kBigListCap = kSmemRowMax / 2;
constexpr bool kFilterCtaList = true;  // filter kernel: in-CTA candidate list (top-k / short rows)

struct FilterSmem {
  float tmax[kFilterThreads];  // per-thread maxima of l (pass 1)
  int cand_id[kCandCap];
  float cand_l[kCandCap];
  int ncand;
  uint32_t cnt[kHistBins];
  uint32_t mlo[kHistBins];  // bin masses (radix_select, mode 1): low and high 32-bit words
  uint32_t mhi[kHistBins];
  unsigned long long red64[96];  // 64-bit reduction scratch (three 32-warp arrays)
  double redd[32];
  int redi[32];
  float redf[32];
  float redf2[32];
  double resd[4];
  float resf[3];
  int resi;
  int resn;
  uint32_t sel_key;
  unsigned long long sel_above_mass;
  int sel_above_cnt;
  int sel_eq_cnt;
  unsigned long long sel_eq_mass;
  double sel_target;  // mode 1 target of the last radix_select (frac >= 0: computed there)
  uint32_t sel_prefix, sel_pmask;  // radix_select stopped before its last pass: its state
};

constexpr int kUnroll = 2;                       // groups of VEC columns in flight per thread

// Element source for the filter kernel: the shared-memory row or the logits in global memory.
// Thread `tid` visits groups of VEC consecutive columns at tid*VEC + n*blockDim*VEC.
template <int DT>
struct RowSrc {
  const typename Elt<DT>::T* crow;
  const typename Elt<DT>::T* urow;
  const float* srow;
  bool guided, vec;
  float g;
  int banned, V;
  __device__ __forceinline__ float l(int t) const {
    if (srow) return srow[t];
    const float c = Elt<DT>::cvt(crow[t]);
    const float u = guided ? Elt<DT>::cvt(urow[t]) : 0.f;
    return make_l(c, u, guided, g, t, banned);
  }
  __device__ __forceinline__ void group(int base, float (&out)[Elt<DT>::VEC]) const {
    constexpr int VEC = Elt<DT>::VEC;
    if (srow) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = (base + e < V) ? srow[base + e] : neg_inf();
      return;
    }
    float c[VEC];
    load_vec<DT>(crow, base, V, vec, c);
    if (guided) {
      float u[VEC];
      load_vec<DT>(urow, base, V, vec, u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = make_l(c[e], u[e], true, g, base + e, banned);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) out[e] = make_l(c[e], 0.f, false, 0.f, base + e, banned);
    }
  }
  // f(t, l) for every column t < V of the row (any order).
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
    constexpr int VEC = Elt<DT>::VEC;
    const int step = blockDim.x * VEC;
    for (int b0 = threadIdx.x * VEC; b0 < V; b0 += step * kUnroll) {
      float lv[kUnroll][VEC];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) group(b0 + k * step, lv[k]);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const int t = b0 + k * step + e;
          if (t < V) f(t, lv[k][e]);
        }
    }
  }
};

// A list source: (id[j], l[j]) for j < n (id == nullptr: id = j). Same for_each contract.
struct CandSrc {
  const int* id;
  const float* l;
  int n;
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
    for (int j = threadIdx.x; j < n; j += blockDim.x) f(id ? id[j] : j, l[j]);
  }
};

// CTA-wide radix select: among the columns for which f(t, l, &key) returns true, finds the key
// K at which the count (mode 0: reaching `need`) or the fixed-point mass mf(key) (mode 1:
// reaching `target`; frac >= 0: target = frac x the mass of every such column, computed in the
// first pass) accumulated from the largest key down first reaches the goal. The mass is computed
// only for columns inside the current prefix (first pass: all of them; later passes: one bin's).
// Results in sm: sel_key = K, sel_above_cnt / sel_above_mass = strictly above K, sel_eq_cnt =
// count at K. Passes [pass_begin, pass_end) of the three (digits of 11, 11, 10 bits) only: a call
// that stops early leaves its state (sel_prefix / sel_pmask, the chosen digit's bin in sel_key,
// the sums above it, sel_target) for a call that resumes at pass_end, e.g. on another source.
template <typename Src, typename F, typename MF = NoMass>
__device__ void radix_select(FilterSmem& sm, const Src& src, int mode, long long need,
                             double target, F f, MF mf = MF{}, double frac = -1.0,
                             int pass_begin = 0, int pass_end = 3) {
  const int tid = threadIdx.x;
  uint32_t prefix = 0, pmask = 0;
  long long above_cnt = 0;
  unsigned long long above_mass = 0;
  if (pass_begin > 0) {
    prefix = sm.sel_prefix;
    pmask = sm.sel_pmask;
    above_cnt = sm.sel_above_cnt;
    above_mass = sm.sel_above_mass;
    target = sm.sel_target;
    __syncthreads();
  }
  const int shifts[3] = {21, 10, 0};
  const int widths[3] = {11, 11, 10};
  for (int pass = pass_begin; pass < pass_end; ++pass) {
    const int sh = shifts[pass];
    const uint32_t wmask = (1u << widths[pass]) - 1u;
    for (int i = tid; i < kHistBins; i += blockDim.x) {
      sm.cnt[i] = 0;
      sm.mlo[i] = 0;
      sm.mhi[i] = 0;
    }
    __syncthreads();
    src.for_each([&](int t, float l) {
      uint32_t key;
      if (!f(t, l, key)) return;
      if ((key & pmask) != prefix) return;
      const uint32_t bin = (key >> sh) & wmask;
      atomicAdd(&sm.cnt[bin], 1u);
      if (mode == 1) mass_add(sm.mlo, sm.mhi, bin, mf(key));
    });
    __syncthreads();
    if (tid < 32) {
      // Lane L scans its `per` bins in descending order, starting at top - L*per.
      const int nbins = (int)wmask + 1;
      const int per = nbins / 32;
      const int hi = nbins - 1 - tid * per;
      const BinPrefix bp = bin_prefix(sm.cnt, sm.mlo, sm.mhi, mode, hi, per, tid);
      if (mode == 1 && pass == 0 && frac >= 0.0)
        target = frac * (double)__shfl_sync(0xffffffffu, bp.pm, 31);  // every column is in
      const int srcl = goal_lane(bp, mode, above_cnt, need, above_mass, target);
      if (tid == srcl) {
        long long c = above_cnt + (bp.pc - bp.lc);
        unsigned long long m = above_mass + (bp.pm - bp.lm);
        const int chosen = goal_bin(sm.cnt, sm.mlo, sm.mhi, mode, hi, per, bp.last_ne, need, target, c, m);
        sm.sel_key = (uint32_t)chosen;
        sm.sel_above_cnt = (int)c;
        sm.sel_above_mass = m;
        sm.sel_eq_cnt = (int)sm.cnt[chosen];
        sm.sel_eq_mass = mode == 1 ? mass_at(sm.mlo, sm.mhi, chosen) : 0ull;
        sm.sel_target = target;
      }
    }
    __syncthreads();
    prefix |= sm.sel_key << sh;
    pmask |= wmask << sh;
    above_cnt = sm.sel_above_cnt;
    above_mass = sm.sel_above_mass;
    __syncthreads();
  }
  if (pass_end < 3) {
    if (tid == 0) {
      sm.sel_prefix = prefix;
      sm.sel_pmask = pmask;
    }
  } else if (tid == 0) {
    sm.sel_key = prefix;
  }
  __syncthreads();
}

// CTA argmax of (double value desc, id asc); result id returned to every thread.
__device__ __forceinline__ int cta_argmax(FilterSmem& sm, double v, int id) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  warp_argmax(v, id);
  if (lane == 0) {
    sm.redd[warp] = v;
    sm.redi[warp] = id;
  }
  __syncthreads();
  if (warp == 0) {
    double w = lane < (int)(blockDim.x >> 5) ? sm.redd[lane] : 0.0;
    int i = lane < (int)(blockDim.x >> 5) ? sm.redi[lane] : INT_MAX;
    warp_argmax(w, i);
    if (lane == 0) sm.resi = i;
  }
  __syncthreads();
  const int r = sm.resi;
  __syncthreads();
  return r;
}
__device__ __forceinline__ float cta_max(FilterSmem& sm, float v) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) sm.redf[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < (int)(blockDim.x >> 5) ? sm.redf[lane] : neg_inf();
    w = warp_max(w);
    if (lane == 0) sm.redf2[0] = w;
  }
  __syncthreads();
  const float r = sm.redf2[0];
  __syncthreads();
  return r;
}

template <int DT>
__device__ __forceinline__ void filter_row(const SampleParams& P, unsigned char* smem_raw, int row) {
  FilterSmem& sm = *reinterpret_cast<FilterSmem*>(smem_raw);
  float* srow = P.smem_row ? reinterpret_cast<float*>(smem_raw + sizeof(FilterSmem)) : nullptr;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  // Device row_offsets that are not monotone can map a row outside its request's range: such a
  // row is never guided, so no uncond row outside [0, uncond_num_rows) is ever read.
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  if (!is_filtered(q, P.V)) return;
  constexpr int VEC = Elt<DT>::VEC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int V = P.V;
  const int i = row - q.row_begin;
  using T = typename Elt<DT>::T;
  RowSrc<DT> src;
  src.crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  src.urow = q.guided ? reinterpret_cast<const T*>(P.uncond) + (q.ufirst + i) * P.uncond_stride : nullptr;
  src.srow = nullptr;
  src.guided = q.guided;
  src.vec = P.vec_ok != 0;
  src.g = q.g;
  src.banned = P.banned;
  src.V = V;

  // Pass 1: max / argmax / second of l, count of finite columns; fill the shared row. A row the
  // candidates' finish sent here (its block records intact) without top-k and not held in shared
  // memory skips it: the maximum, first argmax and runner-up come from the block records and the
  // maximum's block, as in that finish (n0, unknown, only bounds top-k and the short-row list:
  // V stands for it). Saves one of the three reads of a wide top-p nucleus.
  const bool recs_head = kUseCandidates && !P.direct_filter && !srow && (q.k <= 0 || q.k >= V);
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  int n0 = 0, n_tf = 0;
  Top2 rec{neg_inf(), INT_MAX, neg_inf()};  // recs_head: over the block records
  if (recs_head) {
    if (warp == 0) {
      const BlockRec* recs = P.recs + (long long)row * P.nblocks;
      for (int b = lane; b < P.nblocks; b += 32) {
        const float m1 = __ldcg(&recs[b].maxl);
        if (m1 == neg_inf()) continue;
        Top2 o{m1, P.pass_top2 ? __ldcg(&recs[b].amax) : b,
               P.pass_top2 ? __ldcg(&recs[b].second) : neg_inf()};
        rec = top2_merge(rec, o);
      }
      rec = warp_top2(rec);
      if (lane == 0) {
        sm.resf[2] = rec.m1;
        sm.resi = rec.i1;
        sm.resf[1] = rec.m2;
      }
    }
    __syncthreads();
    rec = Top2{sm.resf[2], sm.resi, sm.resf[1]};
    __syncthreads();
    // Without top-2 records: the maximum's block (one column per thread) for its first column
    // and its runner-up.
    const int c = rec.i1 * kB + tid;
    if (rec.m1 != neg_inf() && !P.pass_top2 && tid < kB && c < V) {
      const float v = src.l(c);
      if (v != neg_inf()) t = Top2{v, c, neg_inf()};
    }
  } else {
    src.for_each([&](int c, float v) {
      if (srow) srow[c] = v;
      if (v == neg_inf()) return;
      ++n0;
      Top2 o{v, c, neg_inf()};
      t = top2_merge(t, o);
    });
    sm.tmax[tid] = t.m1;
    n_tf = __syncthreads_count(t.m1 != neg_inf());
  }
  t = warp_top2(t);
  n0 = warp_sumi(n0);
  if (lane == 0) {
    sm.redf[warp] = t.m1;
    sm.redi[warp] = t.i1;
    sm.redf2[warp] = t.m2;
    sm.cnt[warp] = (uint32_t)n0;
  }
  __syncthreads();
  if (warp == 0) {
    Top2 w{sm.redf[lane], sm.redi[lane], sm.redf2[lane]};
    w = warp_top2(w);
    int n = warp_sumi((int)sm.cnt[lane]);
    if (recs_head) {
      if (P.pass_top2) w = rec;
      else w = Top2{rec.m1, w.i1, fmaxf(rec.m2, w.m2)};
      n = rec.m1 == neg_inf() ? 0 : V;  // (n0 unknown: V bounds it)
    }
    if (lane == 0) {
      sm.resf[0] = w.m1;
      sm.resi = w.i1;
      sm.resf[1] = w.m2;
      sm.resn = n;
    }
  }
  __syncthreads();
  const float Ml = sm.resf[0];
  const int amax = sm.resi;
  const float second_l = sm.resf[1];
  n0 = sm.resn;
  __syncthreads();
  if (srow) src.srow = srow;
  if (n0 == 0) {
    if (tid == 0) write_empty(P, row);
    return;
  }
  const float invT = q.invT;
  const float m = xform(Ml, invT);
  const double md = (double)m;

  // Kept prefix (kthr, cid): key > kthr || (key == kthr && t <= cid). Initially every column.
  uint32_t kthr = 0;
  int cid = INT_MAX;

  // Candidates: when top-k is on, every kept column has a key >= the k-th largest per-thread
  // maximum (those are k distinct columns); when the row has few finite columns, all of them.
  // The list (in shared memory) then replaces the row for every selection pass and the sums.
  bool cand = false;
  if (kFilterCtaList && ((q.k > 0 && q.k < n0) || n0 <= kCandCap)) {
    uint32_t tau = 0;
    if (q.k > 0 && q.k < n0 && q.k <= n_tf && n0 > kCandCap) {
      CandSrc ts{nullptr, sm.tmax, (int)blockDim.x};
      radix_select(sm, ts, 0, q.k, 0.0, [&](int c, float l, uint32_t& key) {
        if (l == neg_inf()) return false;
        key = fkey(xform(l, invT));
        return true;
      });
      tau = sm.sel_key;
    }
    if (tid == 0) sm.ncand = 0;
    __syncthreads();
    src.for_each([&](int c, float l) {
      const bool want = l != neg_inf() && fkey(xform(l, invT)) >= tau;
      const unsigned act = __activemask();
      const unsigned bal = __ballot_sync(act, want);
      if (!bal) return;
      const int leader = __ffs(bal) - 1;
      int base = 0;
      if (lane == leader) base = atomicAdd(&sm.ncand, __popc(bal));
      base = __shfl_sync(act, base, leader);
      if (want) {
        const int j = base + __popc(bal & ((1u << lane) - 1u));
        if (j < kCandCap) {
          sm.cand_id[j] = c;
          sm.cand_l[j] = l;
        }
      }
    });
    __syncthreads();
    cand = sm.ncand <= kCandCap;
  }
  CandSrc csrc{sm.cand_id, sm.cand_l, cand ? sm.ncand : 0};
  // The min-p threshold (a >= amin is kept) depends on m only.
  float amin = neg_inf();
  if (q.minp > 0.f) {
    if (tid == 0) sm.redf[0] = minp_threshold(m, md, q.minp);
    __syncthreads();
    amin = sm.redf[0];
    __syncthreads();
  }
  const int nb = P.nblocks;
  unsigned long long* bsum = reinterpret_cast<unsigned long long*>(P.recs + (long long)row * nb);  // [nb][4]
  constexpr double kFix = 1099511627776.0;  // 2^40
  constexpr float kLog2e = 1.4426950408889634f;
  // Kept sums gathered during the selection (the boundary pass of wide top-p nuclei, below):
  // this thread's fixed-point parts, added to the list's in the final sums.
  bool pre_sums = false;
  unsigned long long pre_zf = 0;
  long long pre_ef = 0;
  int pre_nk = 0;

  auto select = [&](const auto& S) {
    // The rr-th smallest id among the columns at key K inside the current prefix (of source T).
    auto tie_cut_in = [&](const auto& T, uint32_t K, int rr) -> int {
      radix_select(sm, T, 0, rr, 0.0, [&](int c, float l, uint32_t& key) {
        if (l == neg_inf()) return false;
        const uint32_t kk = fkey(xform(l, invT));
        if (kk != K) return false;
        if (kk == kthr && c > cid) return false;
        key = ~(uint32_t)c;
        return true;
      });
      return (int)~sm.sel_key;
    };
    auto tie_cut = [&](uint32_t K, int rr) -> int { return tie_cut_in(S, K, rr); };
    if (q.k > 0 && q.k < n0) {
      radix_select(sm, S, 0, q.k, 0.0, [&](int c, float l, uint32_t& key) {
        if (l == neg_inf()) return false;
        key = fkey(xform(l, invT));
        return true;
      });
      const uint32_t K = sm.sel_key;
      const int rr = q.k - sm.sel_above_cnt;
      const int eq = sm.sel_eq_cnt;
      __syncthreads();
      int c2 = INT_MAX;
      if (rr < eq) c2 = tie_cut(K, rr);
      kthr = K;
      cid = c2;
    }
    if (q.p < 1.f) {
      if (q.p <= 0.f) {
        const uint32_t K = fkey(m);
        const int c2 = tie_cut(K, 1);
        kthr = K;
        cid = c2;
      } else {
        // Z1 over the current prefix (fixed point) is the first pass's total: target = p Z1.
        auto mass_of = [&](uint32_t kk) {
          return __double2ull_rn(exp((double)fkey_inv(kk) - md) * kMassScale);
        };
        auto in_prefix = [&](int c, float l, uint32_t& key) {
          if (l == neg_inf()) return false;
          const uint32_t kk = fkey(xform(l, invT));
          if (kk < kthr || (kk == kthr && c > cid)) return false;
          key = kk;
          return true;
        };
        bool listed = false;
        if (!cand) {
          // The row itself: after the first digit, when the columns at or above the boundary
          // digit fit the shared list, one more pass over the row lists them, and the other
          // digits, the tie cut and the kept sums run on the list (3 reads of the row instead of
          // 5 where the nucleus is not a large share of the row).
          radix_select(sm, S, 1, 0, 0.0, in_prefix, mass_of, (double)q.p, 0, 1);
          const uint32_t bd = sm.sel_key;  // the boundary digit (key bits 31..21)
          const int eqn = sm.sel_eq_cnt;   // columns in it
          const long long upto = (long long)sm.sel_above_cnt + eqn;
          __syncthreads();
          if (upto <= kCandCap) {
            if (tid == 0) sm.ncand = 0;
            __syncthreads();
            S.for_each([&](int c, float l) {
              uint32_t kk;
              if (!in_prefix(c, l, kk) || (kk >> 21) < bd) return;
              const int j = atomicAdd(&sm.ncand, 1);
              if (j < kCandCap) {
                sm.cand_id[j] = c;
                sm.cand_l[j] = l;
              }
            });
            __syncthreads();
            listed = true;
            cand = true;
            csrc.n = min(sm.ncand, kCandCap);
            radix_select(sm, csrc, 1, 0, 0.0, in_prefix, mass_of, -1.0, 1, 3);
          } else if (!P.stats_guided &&
                     eqn <= (P.smem_row ? kCandCap : kBigListCap)) {
            // A wide nucleus: one pass over the row adds the columns above the boundary digit
            // (all kept but for min-p) to the kept sums, per 1024-block in fixed point, and
            // lists the boundary digit's columns; the other digits, the tie cut and the rest of
            // the sums run on that list. 3 reads of the row instead of 5.
            int* lid = P.smem_row ? sm.cand_id : reinterpret_cast<int*>(smem_raw + sizeof(FilterSmem));
            float* ll = P.smem_row ? sm.cand_l : reinterpret_cast<float*>(lid + kBigListCap);
            const int lcap = P.smem_row ? kCandCap : kBigListCap;
            for (int b = tid; b < nb; b += blockDim.x) bsum[b * 4] = 0ull;
            if (tid == 0) sm.ncand = 0;
            __syncthreads();
            constexpr int kCh = 32 * VEC;
            const int step = blockDim.x * VEC;
            const int Vr = (V + kCh - 1) / kCh * kCh;
            for (int b0 = tid * VEC; b0 < Vr; b0 += step * kUnroll) {
              float lv[kUnroll][VEC];
#pragma unroll
              for (int k = 0; k < kUnroll; ++k) src.group(b0 + k * step, lv[k]);
#pragma unroll
              for (int k = 0; k < kUnroll; ++k) {
                const int base = b0 + k * step;
                const int chunk0 = base - lane * VEC;  // warp-uniform, inside one 1024-block
                if (chunk0 >= Vr) break;
                unsigned long long cs = 0;
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                  uint32_t kk;
                  if (!in_prefix(base + e, lv[k][e], kk)) continue;
                  const uint32_t dg = kk >> 21;
                  if (dg > bd) {
                    const float a = fkey_inv(kk);
                    if (a >= amin) {
                      const float d2 = fmaxf((a - m) * kLog2e, -1000.f);
                      const float x = ex2(d2);
                      cs += __double2ull_rn((double)x * kFix);
                      pre_ef += __double2ll_rn((double)(x * d2) * (0.6931471805599453 * kFix));
                      ++pre_nk;
                    }
                  } else if (dg == bd) {
                    const int j = atomicAdd(&sm.ncand, 1);
                    if (j < lcap) {
                      lid[j] = base + e;
                      ll[j] = lv[k][e];
                    }
                  }
                }
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) cs += __shfl_xor_sync(0xffffffffu, cs, o);
                if (lane == 0 && cs) {
                  atomicAdd(&bsum[(chunk0 >> 10) * 4], cs);
                  pre_zf += cs;
                }
              }
            }
            __syncthreads();
            listed = true;
            cand = true;
            pre_sums = true;
            csrc = CandSrc{lid, ll, min(sm.ncand, lcap)};
            radix_select(sm, csrc, 1, 0, 0.0, in_prefix, mass_of, -1.0, 1, 3);
          } else {
            radix_select(sm, S, 1, 0, 0.0, in_prefix, mass_of, -1.0, 1, 3);
          }
        } else {
          radix_select(sm, S, 1, 0, 0.0, in_prefix, mass_of, (double)q.p);
        }
        const double target = sm.sel_target;
        const uint32_t K = sm.sel_key;
        const unsigned long long A = sm.sel_above_mass;
        const int eq = sm.sel_eq_cnt;
        __syncthreads();
        const double e = (double)mass_of(K);
        long long nk;
        if ((double)A >= target) nk = 1;
        else nk = (long long)ceil((target - (double)A) / e);
        if (nk < 1) nk = 1;
        if (nk < eq) {
          cid = listed ? tie_cut_in(csrc, K, (int)nk) : tie_cut(K, (int)nk);
        } else if (K != kthr) {
          cid = INT_MAX;
        }
        kthr = K;
      }
    }
  };
  if (cand) select(csrc);
  else select(src);
  auto in_k = [&](int c, float a) -> bool {
    const uint32_t kk = fkey(a);
    return (kk > kthr || (kk == kthr && c <= cid)) && a >= amin;
  };

  // Final pass: kept sums per warp-chunk of 32*VEC columns (deterministic: stored per slot in
  // the row's block records, 8 floats per 1024-block), processed and guided statistics.
  float* part = reinterpret_cast<float*>(P.recs + (long long)row * nb);  // [nb][8]
  constexpr int kChunk = 32 * VEC;
  constexpr int kSlots = kB / kChunk;  // 8 (f32) or 4 (16-bit)
  const int nchunks = (V + kChunk - 1) / kChunk;
  double Z = 0, E = 0, Zl = 0, El = 0;
  int nk = 0;
  const bool cand_sums = cand && !P.stats_guided;
  if (cand_sums) {
    // Sums over the kept set from the candidate list, in 64-bit fixed point (order-independent),
    // added to those of the boundary pass (pre_sums: the columns above the list's digit).
    if (!pre_sums) {
      for (int b = tid; b < nb; b += blockDim.x) bsum[b * 4] = 0ull;
      __syncthreads();
    }
    unsigned long long zf = pre_zf;
    long long ef = pre_ef;
    nk = pre_nk;
    for (int j = tid; j < csrc.n; j += blockDim.x) {
      const int c = csrc.id[j];
      const float a = xform(csrc.l[j], invT);
      if (!in_k(c, a)) continue;
      const float d2 = fmaxf((a - m) * kLog2e, -1000.f);
      const float x = ex2(d2);
      const unsigned long long ux = __double2ull_rn((double)x * kFix);
      atomicAdd(&bsum[(c >> 10) * 4], ux);
      zf += ux;
      ef += __double2ll_rn((double)(x * d2) * (0.6931471805599453 * kFix));
      ++nk;
    }
    Z = (double)zf / kFix;
    E = (double)ef / kFix;
  } else {
    const int step = blockDim.x * VEC;
    const int Vr = nchunks * kChunk;
    for (int b0 = tid * VEC; b0 < Vr; b0 += step * kUnroll) {
      float lv[kUnroll][VEC];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) src.group(b0 + k * step, lv[k]);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int base = b0 + k * step;  // warp-uniform chunk: base - lane*VEC
        if (base - lane * VEC >= Vr) break;
        float s = 0.f, en = 0.f, sl = 0.f, el = 0.f;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float l = lv[k][e];
          if (l == neg_inf()) continue;
          const float a = xform(l, invT);
          if (in_k(base + e, a)) {
            const float d = fmaxf(a - m, -1000.f);
            const float x = fexp(d);
            s += x;
            en = fmaf(x, d, en);
            ++nk;
          }
          if (P.stats_guided) {
            const float d = fmaxf(l - Ml, -1000.f);
            const float x = fexp(d);
            sl += x;
            el = fmaf(x, d, el);
          }
        }
        E += en;
        Zl += sl;
        El += el;
        s = warp_sum(s);
        Z += (lane == 0) ? (double)s : 0.0;
        if (lane == 0) {
          const int chunk = (base - lane * VEC) / kChunk;
          part[(chunk / kSlots) * 8 + (chunk % kSlots)] = s;
        }
      }
    }
  }
  nk = warp_sumi(nk);
  Z = warp_sumd(Z);
  E = warp_sumd(E);
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
  if (lane == 0) {
    sm.redd[warp] = Z;
    sm.red64[warp] = (unsigned long long)__double_as_longlong(E);
    sm.red64[32 + warp] = (unsigned long long)__double_as_longlong(Zl);
    sm.red64[64 + warp] = (unsigned long long)__double_as_longlong(El);
    sm.cnt[warp] = (uint32_t)nk;
  }
  __syncthreads();
  if (warp == 0) {
    double z = sm.redd[lane], e = __longlong_as_double((long long)sm.red64[lane]);
    double zl = __longlong_as_double((long long)sm.red64[32 + lane]);
    double elv = __longlong_as_double((long long)sm.red64[64 + lane]);
    int n = (int)sm.cnt[lane];
    z = warp_sumd(z);
    e = warp_sumd(e);
    zl = warp_sumd(zl);
    elv = warp_sumd(elv);
    n = warp_sumi(n);
    if (lane == 0) {
      sm.resd[0] = z;
      sm.resd[1] = e;
      sm.resd[2] = zl;
      sm.resd[3] = elv;
      sm.resn = n;
    }
  }
  __syncthreads();
  Z = sm.resd[0];
  E = sm.resd[1];
  Zl = sm.resd[2];
  El = sm.resd[3];
  const int nkept = sm.resn;
  __syncthreads();

  // Winning block: its kept sum from the chunk partials (fixed order), float64 scores.
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : i);
  double best = 0;
  int bbest = INT_MAX;
  for (int b = tid; b < nb; b += blockDim.x) {
    float s = 0.f;
    if (cand_sums) {
      s = (float)((double)__ldcg(&bsum[b * 4]) / kFix);
    } else {
      for (int sl = 0; sl < kSlots; ++sl)
        if (b * kSlots + sl < nchunks) s += part[b * 8 + sl];
    }
    if (!(s > 0.f)) continue;
    const double score = (md + log((double)s)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
    argmax_merge(best, bbest, score, b);
  }
  const int wb = cta_argmax(sm, best, bbest);
  // Token within the block: approximate Gumbels, exact float64 for the candidates.
  const int c = wb * kB + tid;
  float a = neg_inf();
  uint64_t bits = 0;
  float sf = neg_inf();
  if (wb != INT_MAX && c < V && tid < kB) {
    const float l = src.l(c);
    if (l != neg_inf()) {
      a = xform(l, invT);
      if (in_k(c, a)) {
        bits = random_bits(q.seed, q.step, pos, (uint32_t)c, kSaltToken);
        sf = a + approx_gumbel(bits);
      }
    }
  }
  const float bf = cta_max(sm, sf);
  best = 0;
  bbest = INT_MAX;
  if (sf != neg_inf() && sf >= bf - approx_margin(bf)) {
    best = (double)a + bits_to_gumbel(bits);
    bbest = c;
  }
  const int token_sel = cta_argmax(sm, best, bbest);
  if (tid == 0) {
    const int token = (token_sel == INT_MAX) ? amax : token_sel;
    double logprob, conf, margin, ent;
    RowInfo ri;
    ri.empty = 0;
    ri.token = token;
    ri.invT = invT;
    ri.kthr = kthr;
    ri.cid = cid;
    ri.amin = amin;
    const float lt = src.l(token);
    if (P.stats_guided) {
      const double logS = log(Zl);
      logprob = ((double)lt - (double)Ml) - logS;
      conf = exp(-logS);
      const double p2 = (second_l == neg_inf()) ? 0.0 : exp(((double)second_l - (double)Ml) - logS);
      margin = conf - p2;
      ent = log(Zl) - El / Zl;
      ri.mode = 0;
      ri.use_a = 0;
      ri.logS = logS;
      ri.M = Ml;
    } else {
      const double logS = log(Z);
      logprob = ((double)xform(lt, invT) - md) - logS;
      conf = exp(-logS);
      const double p2 = (nkept < 2) ? 0.0 : exp(((double)xform(second_l, invT) - md) - logS);
      margin = conf - p2;
      ent = log(Z) - E / Z;
      ri.mode = 2;
      ri.use_a = 1;
      ri.logS = logS;
      ri.M = m;
    }
    if (ent < 0) ent = 0;
    write_outputs(P, row, token, amax, logprob, conf, margin, ent);
    P.rowinfo[row] = ri;
  }
}

// kUseCandidates: the rows that the row pass's finish could not prove from its candidates (the
// list fb_rows[0, fb_count), in any order), a grid-stride loop; the last CTA resets the list
// (graph-safe: zero at rest). Otherwise one CTA per row, every filtered row.
template <int DT>
__global__ void __launch_bounds__(kFilterThreads) filter_kernel(SampleParams P) {
  pdl_sync();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  if (kUseCandidates && !P.direct_filter) {
    const int n = min((int)*reinterpret_cast<volatile int*>(P.fb_count), P.num_rows);
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
      const int row = __ldcg(P.fb_rows + i);
      if (row < 0 || row >= P.num_rows) continue;  // (uniform) never for a list of this call
      filter_row<DT>(P, smem_raw, row);
      __syncthreads();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      const unsigned old = atomicAdd(P.fb_done, 1u);
      if (old == gridDim.x - 1) {
        *P.fb_count = 0;
        *P.fb_done = 0u;
        __threadfence();
      }
    }
  } else {
    filter_row<DT>(P, smem_raw, blockIdx.x);
  }
}

// ------------------------------------------------------------------------------------------------
// Probabilities (after the row kernels): one CTA of 256 threads per (row, 4096-column chunk).
template <int DT>
__global__ void __launch_bounds__(256) probs_kernel(const __grid_constant__ SampleParams P, int chunks) {
  pdl_sync();
  constexpr int VEC = Elt<DT>::VEC;
  const long long bid = blockIdx.x;
  const int row = (int)(bid / chunks);
  const int chunk = (int)(bid - (long long)row * chunks);
  if (row >= P.num_rows) return;
  const int r = find_request(P, row);
  Req q = load_req(P, r);
  // Device row_offsets that are not monotone can map a row outside its request's range: such a
  // row is never guided, so no uncond row outside [0, uncond_num_rows) is ever read.
  if (row < q.row_begin || row >= q.row_end) q.guided = false;
  const RowInfo ri = P.rowinfo[row];
  using T = typename Elt<DT>::T;
  const int i = row - q.row_begin;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const T* urow = q.guided ? reinterpret_cast<const T*>(P.uncond) + (q.ufirst + i) * P.uncond_stride : nullptr;
  const int odt = P.probs_dtype;
  const int osz = odt == 0 ? 4 : 2;
  char* orow = reinterpret_cast<char*>(P.probs) + (long long)row * P.probs_stride * osz;
  const bool ovec = ((uintptr_t)P.probs % 16 == 0) && ((P.probs_stride * osz) % 16 == 0);
  const bool vec = P.vec_ok != 0;
  const float rM = ri.M;
  const float lS = (float)ri.logS;
  constexpr float kLog2e = 1.4426950408889634f;
  const int cbeg = chunk * kProbsChunk;
  const int cend = min(P.V, cbeg + kProbsChunk);
  for (int c0 = cbeg + threadIdx.x * VEC; c0 < cend; c0 += blockDim.x * VEC) {
    float pv[VEC];
    if (ri.mode == 1 || ri.mode == 3) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) pv[e] = (ri.mode == 1 && c0 + e == ri.token) ? 1.f : 0.f;
    } else {
      float cv[VEC], uv[VEC];
      load_vec<DT>(crow, c0, P.V, vec, cv);
      if (q.guided) load_vec<DT>(urow, c0, P.V, vec, uv);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float l = make_l(cv[e], q.guided ? uv[e] : 0.f, q.guided, q.g, c0 + e, P.banned);
        float x = ri.use_a ? xform(l, ri.invT) : l;
        bool keep = l != neg_inf();
        if (ri.mode == 2) {
          const uint32_t kk = fkey(x);
          keep = keep && (kk > ri.kthr || (kk == ri.kthr && c0 + e <= ri.cid)) && x >= ri.amin;
        }
        pv[e] = keep ? ex2(((x - rM) - lS) * kLog2e) : 0.f;
      }
    }
    if (ovec && c0 + VEC <= P.V) {
      if (odt == 0) {
#pragma unroll
        for (int h = 0; h < VEC; h += 4)
          *reinterpret_cast<float4*>(orow + (long long)(c0 + h) * 4) = make_float4(pv[h], pv[h + 1], pv[h + 2], pv[h + 3]);
      } else {
        uint32_t w[VEC / 2];
#pragma unroll
        for (int h = 0; h < VEC / 2; ++h) {
          const uint32_t lo = odt == 1 ? f32_to_bf16(pv[2 * h]) : f32_to_f16(pv[2 * h]);
          const uint32_t hi = odt == 1 ? f32_to_bf16(pv[2 * h + 1]) : f32_to_f16(pv[2 * h + 1]);
          w[h] = lo | (hi << 16);
        }
        if (VEC == 4) *reinterpret_cast<uint2*>(orow + (long long)c0 * 2) = make_uint2(w[0], w[1]);
        else *reinterpret_cast<uint4*>(orow + (long long)c0 * 2) = make_uint4(w[0], w[1 % (VEC / 2)], w[2 % (VEC / 2)], w[3 % (VEC / 2)]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (c0 + e < P.V) store_prob(orow, odt, c0 + e, pv[e]);
    }
  }
}

__global__ void status_kernel(SampleParams P) {
  pdl_sync();
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= P.num_requests) return;
  const Req q = load_req(P, r);
  int st = q.status;
  const int b = max(0, q.row_begin), e = min(P.num_rows, q.row_end);
  for (int row = b; row < e; ++row)
    if (P.rowinfo[row].empty) {
      st |= 64;  // DDS_REQ_EMPTY_ROW
      break;
    }
  P.request_status[r] = st;
}

// ------------------------------------------------------------------------------------------------
// Host side
// The filter kernel's dynamic shared memory: FilterSmem, then the row (smem_row) or the long list
// (kBigListCap ids and l values; 1024 threads of 64 registers leave one CTA per SM anyway).
inline size_t filter_smem_bytes(int V, bool smem_row) {
  return sizeof(FilterSmem) + (smem_row ? (size_t)V * sizeof(float) : (size_t)kBigListCap * 8);
}

// The largest dynamic shared memory any launch of the filter kernel asks for. Set once per
// process and device, independent of the sampler's V (samplers of different V share the kernel).
template <int DT>
inline cudaError_t set_filter_attr(int) {
  const size_t bytes = filter_smem_bytes(kSmemRowMax, true);
  return cudaFuncSetAttribute(filter_kernel<DT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)bytes);
}

inline cudaError_t prepare_sample_kernels(int V) {
  cudaError_t e = set_filter_attr<0>(V);
  if (e == cudaSuccess) e = set_filter_attr<1>(V);
  if (e == cudaSuccess) e = set_filter_attr<2>(V);
  return e;
}

// Consecutive blocks per warp of plain_pass_kernel: up to 16, fewer while that would leave
// < 2048 warps.
// Below 1024 rows up to 8 (device A/B, ninth session, 8 -> 16: 256 x 262144 f32 93.5 -> 106.2
// us, 512 x 32000 bf16 42.8 -> 48.2; 512 x 262144 f32 173.6 -> 171.7). No output depends on it.
inline int plain_bpw(int num_rows, int nblocks) {
  int bpw = num_rows < 1024 ? 8 : 16;
  while (bpw > 1 && (long long)num_rows * ((nblocks + bpw - 1) / bpw) < 2048) bpw >>= 1;
  return bpw;
}
// Consecutive blocks per warp of row_pass_kernel for 16-bit logits: up to kFilteredBpwMax, fewer
// while that would leave < 2048 warps, one for rows of <= 2 blocks (their lists hold every
// column: 4096 x 1025 bf16 min-p 143 us with one, 163 us with two). f32 takes one:
// row_pass_kernel<f32> is compiled for one. Device A/B, H200, 2026-11-29 (median us, 1 -> 4
// blocks per warp): 4096 x 262144 bf16 top-k 1134 -> 960, min-p 1276 -> 1107, 4096 x 151936
// top-k 700 -> 596; f32 measured slower with several (1231 -> 1348 at 4096 x 262144 top-k).
// The lists and records are per block whatever the grouping, so no output depends on it.
constexpr int kFilteredBpwMax = 4;
inline int filtered_bpw(int dtype, int num_rows, int nblocks, int max_bpw) {
  if (dtype == 0 || nblocks <= 2) return 1;
  int bpw = max_bpw < 1 ? 1 : max_bpw;
  while (bpw > 1 && (long long)num_rows * ((nblocks + bpw - 1) / bpw) < 2048) bpw >>= 1;
  return bpw;
}
// Default dispatch (src/cuda_sample.cu; the host emulation, tests/emu/emu_sample.cpp, uses the
// same functions):
//  * rows one warp streams whole (nblocks <= bpw) are finished inside the pass from 1024 rows,
//    where a warp per row finishes them anyway; fewer rows keep the CTA-per-row finish kernel;
//  * small grids (<= 4096 row blocks) are latency-bound: the filtered pass then also records each
//    block's first argmax and runner-up, sparing the finish a dependent re-read of the maximum's
//    block (device A/B 2026-11-29: 256 x 1025 top-k 51.6 -> 57.8 us without it); large grids are
//    ALU-bound and skip that work (top-k 50 4096 x 262144 bf16 1631 -> 1247 us). Exact either
//    way (max / min only), so batch invariance holds.
inline bool plain_fuse_default(int num_rows, int nblocks) {
  const int bpw = plain_bpw(num_rows, nblocks);
  return num_rows >= 1024 && (nblocks + bpw - 1) / bpw == 1;
}
inline bool pass_top2_default(int num_rows, int nblocks) {
  return (long long)num_rows * nblocks <= 4096;
}
// cand_finish_kernel: a warp per row, kRowWarps rows per CTA, fewer while that would leave SMs
// without a row (each warp's finish is a latency chain; the warps of a CTA share one SM).
// No output depends on it (the warps are independent).
inline int cand_finish_wpc(int num_rows, int num_sms) {
  const int sms = num_sms > 0 ? num_sms : 132;
  int wpc = kRowWarps;
  while (wpc > 1 && (long long)((num_rows + wpc - 1) / wpc) < sms) wpc >>= 1;
  return wpc;
}
// small_plain_kernel: a CTA per row (the token pass shared by its warps) while the rows fit two
// CTAs per SM; a warp per row beyond. The same bits either way (small_plain_kernel).
inline bool small_cta_default(int num_rows, int num_sms) {
  return num_rows <= 2 * (num_sms > 0 ? num_sms : 132);
}
// small_filter_kernel: a CTA per row up to 4 x SMs rows (device A/B, H200, f32 1025 columns,
// warp -> CTA per row, docs/device-runs.md eighth session call 9: 256 rows top-p 59.1 -> 30.2 us,
// top-k 33.3 -> 23.4; 528 rows top-p 58.3 -> 50.0, top-k 33.0 -> 38.1; call 8: 1024 rows top-p
// 61.2 -> 87.3). The same bits either way.
inline bool small_filter_cta_default(int num_rows, int num_sms) {
  return num_rows <= 4 * (num_sms > 0 ? num_sms : 132);
}
// (end of the default dispatch rules)

// The kernels of one dds_sample call, in stream order: the first one launched as usual, the
// next ones with programmatic stream serialization when `pdl` (pdl_sync; P.pdl, from
// DDS_SAMPLE_PDL=1 on compute capability >= 9; off by default, see src/cuda_sample.cu).
struct Launcher {
  cudaStream_t s;
  bool pdl;
  int n = 0;
  template <typename... KA, typename... A>
  void operator()(void (*k)(KA...), dim3 grid, dim3 block, size_t smem, A&&... a) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl && n > 0 ? 1 : 0;
    ++n;
    (void)cudaLaunchKernelEx(&cfg, k, static_cast<A&&>(a)...);
  }
};

// small_plain_kernel's instantiation for V (the groups held for the last block).
template <int DT, bool CTA>
inline void launch_small_plain(const SampleParams& P, unsigned grid, Launcher& L) {
  switch (small_groups_for<DT>(P.V)) {
    case 0: L(small_plain_kernel<DT, 0, CTA>, grid, kRowWarps * 32, 0, P); break;
    case 1: L(small_plain_kernel<DT, 1, CTA>, grid, kRowWarps * 32, 0, P); break;
    default: L(small_plain_kernel<DT, 32 / Elt<DT>::VEC, CTA>, grid, kRowWarps * 32, 0, P); break;
  }
}

// small_filter_kernel's instantiation for V.
template <int DT, bool CTA>
inline void launch_small_filter(const SampleParams& P, Launcher& L) {
  const unsigned grid = CTA ? (unsigned)P.num_rows : (unsigned)((P.num_rows + kSmallFiltWarps - 1) / kSmallFiltWarps);
  const unsigned nt = CTA ? kRowWarps * 32 : kSmallFiltWarps * 32;
  switch (small_groups_for<DT>(P.V)) {
    case 0: L(small_filter_kernel<DT, 0, CTA>, grid, nt, 0, P); break;
    case 1: L(small_filter_kernel<DT, 1, CTA>, grid, nt, 0, P); break;
    default: L(small_filter_kernel<DT, 32 / Elt<DT>::VEC, CTA>, grid, nt, 0, P); break;
  }
}

// launch flags: which row kernels may have work (decided from host-visible scalars).
template <int DT>
inline cudaError_t launch_sample_dt(SampleParams P, bool run_plain, bool run_filter, int num_sms,
                                   cudaStream_t s) {
  Launcher L{s, P.pdl != 0};
  if (run_plain && P.small_plain && P.nblocks <= 2) {  // unfiltered rows, V <= 2048
    if (P.small_cta) launch_small_plain<DT, true>(P, (unsigned)P.num_rows, L);  // a CTA per row
    else launch_small_plain<DT, false>(P, (unsigned)((P.num_rows + kRowWarps - 1) / kRowWarps), L);
  } else if (run_plain) {  // unfiltered rows
    // Blocks per warp: up to 16 consecutive blocks of a row per warp (the next block's loads in
    // flight during this block's arithmetic), fewer while that would leave < 2048 warps. Then one
    // CTA per row finishes it (plain_finish_kernel). Measured on the H200 (docs/device-runs.md,
    // 2026-11-29): 4096 x 262144 bf16 plain 1582 us -> 682 us (pass + separate finish).
    if (P.bpw <= 0) P.bpw = plain_bpw(P.num_rows, P.nblocks);
    const long long warps = (long long)P.num_rows * ((P.nblocks + P.bpw - 1) / P.bpw);
    const long long grid = (warps + kRowWarps - 1) / kRowWarps;
    if (P.fuse_finish)
      L(plain_pass_kernel<DT, true>, (unsigned)grid, kRowWarps * 32, 0, P);
    else
      L(plain_pass_kernel<DT, false>, (unsigned)grid, kRowWarps * 32, 0, P);
    // Few rows: a CTA per row shortens each row's finish; many rows: a warp per row keeps more
    // rows in flight (measured: 4096 x 1025 bf16 97 us with warps, 224 us with CTAs), and is
    // fused into the pass when P.fuse_finish (the caller zeroed counters when wpr > 1).
    if (P.fuse_finish) {
    } else if (P.num_rows >= 1024)
      L(plain_finish_warp_kernel<DT>, (unsigned)((P.num_rows + kRowWarps - 1) / kRowWarps), kRowWarps * 32, 0, P);
    else
      L(plain_finish_kernel<DT>, (unsigned)P.num_rows, kRowWarps * 32, 0, P);
  }
  if (run_filter && P.small_filter) {  // filtered rows, V <= 2048: one launch, no fallback rows
    if (P.small_filter_cta) launch_small_filter<DT, true>(P, L);  // (small_filter_cta_default)
    else launch_small_filter<DT, false>(P, L);
  } else if (run_filter && kUseCandidates && !P.direct_filter) {  // filtered rows: candidates from the streaming pass
    const int fbpw = DT == 0 ? 1 : (P.fbpw > 0 ? P.fbpw : 1);
    P.fbpw = fbpw;
    const long long warps = (long long)P.num_rows * ((P.nblocks + fbpw - 1) / fbpw);
    const long long grid = (warps + kRowWarps - 1) / kRowWarps;
    L(row_pass_kernel<DT>, (unsigned)grid, kRowWarps * 32, 0, P);
    const int wpc = P.cf_wpc > 0 && P.cf_wpc <= kRowWarps ? P.cf_wpc : cand_finish_wpc(P.num_rows, num_sms);
    L(cand_finish_kernel<DT>, (unsigned)((P.num_rows + wpc - 1) / wpc), wpc * 32, 0, P);
  }
  if (run_filter && !P.small_filter) {
    P.smem_row = P.V <= kSmemRowMax;
    int grid = P.num_rows;
    if (kUseCandidates && !P.direct_filter) {  // fallback rows only: a grid-stride loop over the list
      const int cap = 2 * (num_sms > 0 ? num_sms : 132);
      if (grid > cap) grid = cap;
    }
    L(filter_kernel<DT>, grid, kFilterThreads, filter_smem_bytes(P.V, P.smem_row), P);
  }
  if (P.probs) {
    const int chunks = (P.V + kProbsChunk - 1) / kProbsChunk;
    L(probs_kernel<DT>, (unsigned)((long long)P.num_rows * chunks), 256, 0, P, chunks);
  }
  if (P.request_status) L(status_kernel, (P.num_requests + 127) / 128, 128, 0, P);
  return cudaGetLastError();
}

inline cudaError_t launch_sample(int dtype, const SampleParams& P, bool run_plain, bool run_filter,
                                 int num_sms, cudaStream_t s) {
  switch (dtype) {
    case 0: return launch_sample_dt<0>(P, run_plain, run_filter, num_sms, s);
    case 1: return launch_sample_dt<1>(P, run_plain, run_filter, num_sms, s);
    default: return launch_sample_dt<2>(P, run_plain, run_filter, num_sms, s);
  }
}

// Candidate lists per block: capacity (a power of two) and first threshold level, by shape.
// nblocks <= 2: every finite column (the list is the row); <= 8 blocks: 256 entries, tau = the
// smallest lane maximum (all 32 lanes contribute); < 64 blocks: 64 entries, tau over pairs of
// lanes (>= 16 lanes contribute); else 64 entries, tau over groups of 4 lanes (>= 8; ~20
// columns of a Gaussian block are written, and the room to 64 keeps blocks from raising the
// level, which would raise the row's bound U: simulated on sigma-2 rows at V = 151936, the
// columns above U grow from ~390 to ~880 with 64 entries instead of 32).
inline int cand_cap_for(int V) {
  const int nb = (V + kB - 1) / kB;
  if (nb <= 2) {
    int c = 32;
    while (c < V && c < kB) c <<= 1;
    return c;
  }
  if (nb <= 8) return 256;
  return 64;
}
inline int cand_lvl0_for(int V) {
  const int nb = (V + kB - 1) / kB;
  if (nb <= 2) return -1;
  if (nb <= 8) return 0;
  return nb < 64 ? 1 : 2;
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_CUH_
