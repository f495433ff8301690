// dds_verify_drafts on the GPU. Framework-free; the launcher takes plain pointers and a scratch
// area. Semantics: docs/decoding.md; the CPU reference is src/api_decode.cpp::cpu_verify, which
// builds p and q with the CPU dds_sample (probs output, processed statistics) in float32.
//
// Three launches, no host synchronisation, graph-safe:
//  1. row_kernel, one CTA per (request, row) of the 2n+1 rows of a request (targets p_0..p_n,
//     drafts q_0..q_{n-1}; rows past the request's draft count return at once): the row's
//     processed distribution, summarised as {mode, argmax, M, log Z, bound}. The kept set is
//     {t : finite, key(t) >= bound, exp(x_t - M) >= min_p}, key = (x desc, token asc) as one
//     ordered 64-bit integer; the top-k / top-p boundary is found by a radix select on that key
//     (counts for top-k, 62-bit fixed-point masses for top-p, so that the result does not depend
//     on the order of atomic additions). p(t) = (float)exp((x_t - M) - log Z) in float64, exactly
//     as the CPU writes probs, so any column of p or q can be recomputed from the logits.
//  2. block_kernel, one CTA per (request, 8 blocks of 1024 tokens): redoes the request's
//     accept/reject decisions (n Philox draws and 2n columns), then per block the sums of the
//     residual max(p - q, 0) and of p over the row to sample from.
//  3. finish_kernel, one CTA per request: the winning block (log of its sum + Gumbel VBL1, ties
//     to the lower block), the token within it (log weight + Gumbel VTK1, ties to the lower id),
//     and the outputs.
// CPU and GPU agree on every token except where two candidates tie within float64 rounding (the
// CPU sums in another order, and its block score is m + log(sum exp(w - m)) rather than
// log(sum r)), or a float32 probability sits within rounding of a float boundary.
#ifndef DDS_KERNELS_VERIFY_CUH_
#define DDS_KERNELS_VERIFY_CUH_

#include <cuda_runtime.h>
#include <stdint.h>

#include <cfloat>

#include "../common/dtype.h"
#include "../common/launch.cuh"
#include "../common/offsets.h"
#include "../common/request.h"
#include "../common/rng.h"
#include "../common/row.h"
#include "../common/status.h"
#include "../common/warp.cuh"

namespace dds {
namespace verify {

constexpr uint32_t kSaltVerifyBlock = 0x56424C31u;  // "VBL1" (as in src/api_decode.cpp)
constexpr uint32_t kSaltVerifyToken = 0x56544B31u;  // "VTK1"
constexpr int kRowThreads = 512;
constexpr int kBlockWarps = 8;  // 1024-token blocks per block_kernel CTA, one per warp
constexpr int kFinishThreads = 1024;

enum : int32_t { kModeNormal = 0, kModeGreedy = 1, kModeEmpty = 2 };

struct RowInfo {
  double M;        // max of x over the kept set
  double logS;     // log sum_{kept} exp(x - M)
  uint64_t bound;  // keep only keys >= bound (0: no top-k / top-p limit)
  int32_t mode;
  int32_t amax;  // greedy: the one-hot column
};

struct BlockSums {
  double resid;  // sum over the block of max(p - q, 0)
  double p;      // sum over the block of p
};

struct Params {
  int32_t V;
  int32_t nblocks;  // ceil(V / 1024)
  int32_t num_requests;
  int32_t n;  // num_drafts
  const int32_t* draft_counts;
  const int32_t* draft_tokens;
  const void* draft_logits;
  int64_t draft_stride;
  const void* target_logits;
  int64_t target_stride;
  int32_t dtype;
  rule::Values vals;  // the requests' sampling values (no guidance; kernels/common/request.h)
  int32_t banned;
  const int32_t* allowed;  // allowed-token masks (kernels/common/allowed.h), or null
  int64_t allowed_stride;
  int32_t* accepted;
  int32_t* out_tokens;
  float* out_logprobs;
  int32_t* request_status;
  RowInfo* rows;      // scratch [num_requests * (2n + 1)]
  BlockSums* blocks;  // scratch [num_requests * nblocks]
};

// Scratch bytes for given capacities (max_rows >= num_requests * (n + 1)).
inline size_t workspace_bytes(int32_t vocab, int32_t max_rows, int32_t max_requests) {
  const size_t nb = (size_t)((vocab + kBlockSize - 1) / kBlockSize);
  const size_t rows = 2 * (size_t)(max_rows > 0 ? max_rows : 1);
  const size_t a = (rows * sizeof(RowInfo) + 255) & ~(size_t)255;
  return a + (size_t)(max_requests > 0 ? max_requests : 1) * nb * sizeof(BlockSums);
}

// A request's values after the rules of kernels/common/request.h (rule::request, as the CPU's
// request_params; verify has no unconditional rows) and its draft count.
struct Req : rule::Request {
  int32_t nr;
};

__device__ __forceinline__ Req request_of(const Params& P, int32_t r) {
  int32_t status = 0;
  const int32_t nr = offsets::draft_count(P.draft_counts ? P.draft_counts[r] : P.n, P.n, &status);
  Req q;
  static_cast<rule::Request&>(q) =
      rule::request(P.vals, r, /*row_begin=*/0, /*rows=*/0, /*rows_ok=*/true, /*has_uncond=*/false,
                    /*uncond_row_offsets=*/nullptr, /*uncond_num_rows=*/0, status);
  q.nr = nr;
  return q;
}

// One row's logits and the request's tempering.
struct RowRef {
  const void* base;
  int32_t dtype;
  int32_t banned;
  const int32_t* mask;  // the request's allowed-token mask row (null: every column allowed)
  float invT;
};

// MASK = false: the caller's launch has no masks (the mask row a null constant).
template <bool MASK = true>
__device__ __forceinline__ RowRef target_row(const Params& P, int32_t r, int32_t i,
                                             const Req& q) {
  const size_t esz = P.dtype == 0 ? 4 : 2;
  RowRef w;
  w.base = static_cast<const char*>(P.target_logits) +
           ((int64_t)r * (P.n + 1) + i) * P.target_stride * (int64_t)esz;
  w.dtype = P.dtype;
  w.banned = P.banned;
  w.mask = MASK ? allowed_row(P.allowed, P.allowed_stride, r) : nullptr;
  w.invT = q.invT;
  return w;
}

template <bool MASK = true>
__device__ __forceinline__ RowRef draft_row(const Params& P, int32_t r, int32_t i, const Req& q) {
  const size_t esz = P.dtype == 0 ? 4 : 2;
  RowRef w;
  w.base = static_cast<const char*>(P.draft_logits) +
           ((int64_t)r * P.n + i) * P.draft_stride * (int64_t)esz;
  w.dtype = P.dtype;
  w.banned = P.banned;
  w.mask = MASK ? allowed_row(P.allowed, P.allowed_stride, r) : nullptr;
  w.invT = q.invT;
  return w;
}

// Sanitised logit l_t (docs/sampling.md §2 without guidance: kernels/common/row.h).
__device__ __forceinline__ float l_of(const RowRef& w, int32_t t) {
  return row::make_l(load_elt(w.base, w.dtype, t), 0.f, false, 0.f, t, row::Ban{w.banned, w.mask});
}

// Order-preserving key of (x desc, t asc): larger key ranks first (row::order_key: -0 and +0
// are one value).
__device__ __forceinline__ uint64_t key_of(float x, int32_t t, int32_t V) {
  return ((uint64_t)row::order_key(x) << 32) | (uint32_t)(V - 1 - t);
}

// p(t) of a row summarised by `info`: exactly the float32 the CPU dds_sample writes to probs.
__device__ __forceinline__ float prob_of(const RowRef& w, const RowInfo& info, float minp,
                                         int32_t t, int32_t V) {
  if (info.mode == kModeEmpty) return 0.f;
  if (info.mode == kModeGreedy) return t == info.amax ? 1.f : 0.f;
  const float l = l_of(w, t);
  if (!(l > -INFINITY)) return 0.f;
  const float x = row::temper(l, w.invT);
  if (key_of(x, t, V) < info.bound) return 0.f;
  const double d = (double)x - info.M;
  if (minp > 0.f && !(exp(d) >= (double)minp)) return 0.f;
  return (float)exp(d - info.logS);
}

// ---------------------------------------------------------------------------------------------
// Kernel 1: per-row summaries.
// ---------------------------------------------------------------------------------------------

template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, T* red, Op op) {
  v = kwarp::warp_reduce(v, op);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  T t = red[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) t = op(t, red[w]);
  __syncthreads();
  return t;
}

struct RowSmem {
  uint64_t hist[256];   // masses (fixed point) of the current digit
  uint32_t count[256];  // counts of the current digit
  double dred[32];
  float fred[32];
  int64_t ired[32];
  uint64_t chosen;
  int64_t krem;
  uint64_t above;
};

// Radix select over the keys of the set {finite x, key >= lower}. COUNT: the key ranked k-th
// (1-based) in descending order. MASS: the first key, in descending order, where the running
// mass (fixed point, weights exp(x - m) * scale) reaches `target`; the last key of the set if
// the total stays below it.
template <bool MASS>
__device__ uint64_t radix_select(const RowRef& w, int32_t V, uint64_t lower, int64_t k,
                                 double target, double m, double scale, RowSmem& sm) {
  const int low_bits = V > 1 ? 32 - __clz((unsigned)(V - 1)) : 0;
  uint64_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) {
    sm.krem = k;
    sm.above = 0;
  }
  for (int shift = 56; shift >= 0; shift -= 8) {
    if (shift < 32 && shift >= low_bits) continue;  // index digits above V's bits: all zero
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
      sm.hist[b] = 0;
      sm.count[b] = 0;
    }
    __syncthreads();
    for (int32_t t = threadIdx.x; t < V; t += blockDim.x) {
      const float l = l_of(w, t);
      if (!(l > -INFINITY)) continue;
      const float x = row::temper(l, w.invT);
      const uint64_t key = key_of(x, t, V);
      if (key < lower || (key & mask) != prefix) continue;
      const int d = (int)((key >> shift) & 255u);
      atomicAdd(&sm.count[d], 1u);
      if (MASS) {
        const double wt = exp((double)x - m) * scale;
        atomicAdd((unsigned long long*)&sm.hist[d], (unsigned long long)(wt + 0.5));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1, lowest = -1;
      if (!MASS) {
        int64_t krem = sm.krem;
        for (int b = 255; b >= 0; --b) {
          if (sm.count[b] == 0) continue;
          if ((int64_t)sm.count[b] >= krem) {
            chosen = b;
            break;
          }
          krem -= sm.count[b];
          lowest = b;
        }
        sm.krem = krem;
      } else {
        uint64_t above = sm.above;
        for (int b = 255; b >= 0; --b) {
          if (sm.count[b] == 0) continue;
          const uint64_t cum = above + sm.hist[b];
          if ((double)cum >= target) {
            chosen = b;
            break;
          }
          above = cum;
          lowest = b;
        }
        if (chosen < 0) {
          // Never reached: the last element of the set (keep all). Back out its bucket's mass.
          chosen = lowest;
          if (chosen >= 0) above -= sm.hist[chosen];
        }
        sm.above = above;
      }
      sm.chosen = (uint64_t)(chosen < 0 ? 0 : chosen);
    }
    __syncthreads();
    prefix |= sm.chosen << shift;
    mask |= (uint64_t)255u << shift;
    __syncthreads();
  }
  return prefix;
}

// MASK (row_kernel, block_kernel): the call has allowed-token masks; without, the rows' mask is a
// null constant and the column loops are those of a build without masks (chosen at launch: the
// per-column mask test costs row_kernel 8 and block_kernel 12 registers).
template <bool MASK>
__global__ void __launch_bounds__(kRowThreads) row_kernel(Params P) {
  __shared__ RowSmem sm;
  const int32_t per = 2 * P.n + 1;
  const int32_t r = blockIdx.x / per;
  const int32_t j = blockIdx.x % per;
  const Req q = request_of(P, r);
  const bool is_target = j <= P.n;
  const int32_t i = is_target ? j : j - P.n - 1;
  if (is_target ? i > q.nr : i >= q.nr) return;  // not used by this request
  const RowRef w = is_target ? target_row<MASK>(P, r, i, q) : draft_row<MASK>(P, r, i, q);
  const int32_t V = P.V;

  // Pass 1: finite count, argmax of l (ties to the lower id), max of x.
  int64_t n0 = 0;
  float lmax = -INFINITY;
  int32_t lidx = INT32_MAX;
  float xmax = -INFINITY;
  // No filter: the normaliser in the same pass, as an online sum (per thread, rescaled when its
  // maximum rises; combined below), which saves a second read of the row.
  const bool fused = !q.greedy && q.k <= 0 && !(q.p < 1.f) && !(q.min_p > 0.f);
  double zt = 0;
  for (int32_t t = threadIdx.x; t < V; t += blockDim.x) {
    const float l = l_of(w, t);
    if (!(l > -INFINITY)) continue;
    ++n0;
    if (l > lmax) {  // t increases within a thread: strict > keeps the lower id
      lmax = l;
      lidx = t;
    }
    if (!q.greedy) {
      const float x = row::temper(l, q.invT);
      if (fused) {
        if (x > xmax) {
          zt = zt * exp((double)xmax - (double)x) + 1.0;
        } else {
          zt += exp((double)x - (double)xmax);
        }
      }
      xmax = fmaxf(xmax, x);
    }
  }
  n0 = block_reduce<int64_t>(n0, sm.ired, [](int64_t a, int64_t b) { return a + b; });
  // argmax: reduce (value, index) pairs.
  {
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, lmax, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, lidx, o);
      if (ov > lmax || (ov == lmax && oi < lidx)) {
        lmax = ov;
        lidx = oi;
      }
    }
    __shared__ float s_v[32];
    __shared__ int32_t s_i[32];
    if ((threadIdx.x & 31) == 0) {
      s_v[threadIdx.x >> 5] = lmax;
      s_i[threadIdx.x >> 5] = lidx;
    }
    __syncthreads();
    lmax = s_v[0];
    lidx = s_i[0];
    for (int ww = 1; ww < (int)(blockDim.x >> 5); ++ww)
      if (s_v[ww] > lmax || (s_v[ww] == lmax && s_i[ww] < lidx)) {
        lmax = s_v[ww];
        lidx = s_i[ww];
      }
    __syncthreads();
  }
  RowInfo* out = P.rows + blockIdx.x;
  if (n0 == 0 || q.greedy) {
    if (threadIdx.x == 0) {
      RowInfo o;
      o.M = 0;
      o.logS = 0;
      o.bound = 0;
      o.mode = n0 == 0 ? kModeEmpty : kModeGreedy;
      o.amax = n0 == 0 ? 0 : lidx;
      *out = o;
    }
    return;
  }
  const float tmax = xmax;
  xmax = block_reduce<float>(xmax, sm.fred,
                             [](float a, float b) { return fmaxf(a, b); });
  const double m = (double)xmax;
  if (fused) {
    // A thread with no column has zt = 0 (and tmax = -inf: exp gives 0, no NaN).
    const double z = block_reduce<double>(zt * exp((double)tmax - m), sm.dred,
                                          [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) {
      RowInfo o;
      o.M = m;
      o.logS = log(z);
      o.bound = 0;
      o.mode = kModeNormal;
      o.amax = lidx;
      *out = o;
    }
    return;
  }

  // Filters (docs/sampling.md §3): top-k, then top-p on what top-k kept; min-p per column.
  uint64_t bound = 0;
  const bool use_k = q.k > 0 && (int64_t)q.k < n0;
  const bool use_p = q.p < 1.f;
  if (use_k) bound = radix_select<false>(w, V, 0, q.k, 0.0, m, 0.0, sm);
  if (use_p) {
    // Fixed point: each weight <= 1 scaled so that V of them stay below 2^62.
    const int vbits = V > 1 ? 32 - __clz((unsigned)(V - 1)) : 0;
    const double scale = ldexp(1.0, 62 - vbits);
    unsigned long long tot = 0;
    for (int32_t t = threadIdx.x; t < V; t += blockDim.x) {
      const float l = l_of(w, t);
      if (!(l > -INFINITY)) continue;
      const float x = row::temper(l, q.invT);
      if (key_of(x, t, V) < bound) continue;
      tot += (unsigned long long)(exp((double)x - m) * scale + 0.5);
    }
    tot = (unsigned long long)block_reduce<int64_t>(
        (int64_t)tot, sm.ired, [](int64_t a, int64_t b) { return a + b; });
    const double target = (double)q.p * (double)tot;
    bound = radix_select<true>(w, V, bound, 0, target, m, scale, sm);
  }
  // Normaliser over the kept set.
  double z = 0;
  const bool use_min_p = q.min_p > 0.f;
  for (int32_t t = threadIdx.x; t < V; t += blockDim.x) {
    const float l = l_of(w, t);
    if (!(l > -INFINITY)) continue;
    const float x = row::temper(l, q.invT);
    if (key_of(x, t, V) < bound) continue;
    const double e = exp((double)x - m);
    if (use_min_p && !(e >= (double)q.min_p)) continue;
    z += e;
  }
  z = block_reduce<double>(z, sm.dred, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) {
    RowInfo o;
    o.M = m;
    o.logS = log(z);
    o.bound = bound;
    o.mode = kModeNormal;
    o.amax = lidx;
    *out = o;
  }
}

// ---------------------------------------------------------------------------------------------
// Accept / reject decisions of one request (sequential; called by one thread).
// ---------------------------------------------------------------------------------------------
struct Decision {
  int32_t acc;       // accepted drafts
  bool residual;     // sample from max(p - q, 0) of row acc (else from p of row nr)
};

__device__ __forceinline__ const RowInfo& target_info(const Params& P, int32_t r, int32_t i) {
  return P.rows[(int64_t)r * (2 * P.n + 1) + i];
}
__device__ __forceinline__ const RowInfo& draft_info(const Params& P, int32_t r, int32_t i) {
  return P.rows[(int64_t)r * (2 * P.n + 1) + P.n + 1 + i];
}

template <bool MASK = true>
__device__ Decision decide(const Params& P, int32_t r, const Req& q) {
  Decision d;
  d.acc = 0;
  d.residual = false;
  for (int32_t i = 0; i < q.nr; ++i) {
    const int32_t tok = P.draft_tokens[(int64_t)r * P.n + i];
    double pv = 0.0, qv = 0.0;
    if (tok >= 0 && tok < P.V) {
      pv = (double)prob_of(target_row<MASK>(P, r, i, q), target_info(P, r, i), q.min_p, tok, P.V);
      qv = (double)prob_of(draft_row<MASK>(P, r, i, q), draft_info(P, r, i), q.min_p, tok, P.V);
    }
    const double u = bits_to_uniform(random_bits(q.seed, q.step, (uint32_t)i, 0u, kSaltVerify));
    if (u * qv < pv) {
      ++d.acc;
      continue;
    }
    d.residual = true;
    break;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Kernel 2: per-block sums of the residual and of p for the row each request samples from.
// ---------------------------------------------------------------------------------------------
template <bool MASK>
__global__ void __launch_bounds__(kBlockWarps * 32) block_kernel(Params P) {
  __shared__ Decision s_d;
  const int32_t chunks = (P.nblocks + kBlockWarps - 1) / kBlockWarps;
  const int32_t r = blockIdx.x / chunks;
  const int32_t c = blockIdx.x % chunks;
  const Req q = request_of(P, r);
  if (threadIdx.x == 0) s_d = decide<MASK>(P, r, q);
  __syncthreads();
  const Decision d = s_d;
  const int32_t blk = c * kBlockWarps + (threadIdx.x >> 5);
  if (blk >= P.nblocks) return;
  const int32_t lane = threadIdx.x & 31;
  const int32_t i = d.acc;
  const RowRef tw = target_row<MASK>(P, r, i, q);
  const RowInfo ti = target_info(P, r, i);
  RowRef dw = tw;
  RowInfo di = ti;
  if (d.residual) {
    dw = draft_row<MASK>(P, r, i, q);
    di = draft_info(P, r, i);
  }
  double sr = 0, sp = 0;
  const int32_t lo = blk * kBlockSize, hi = min(P.V, lo + kBlockSize);
  for (int32_t t = lo + lane; t < hi; t += 32) {
    const float pt = prob_of(tw, ti, q.min_p, t, P.V);
    sp += (double)pt;
    if (d.residual) {
      const double rr = (double)pt - (double)prob_of(dw, di, q.min_p, t, P.V);
      if (rr > 0) sr += rr;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    sr += __shfl_xor_sync(0xffffffffu, sr, o);
    sp += __shfl_xor_sync(0xffffffffu, sp, o);
  }
  if (lane == 0) {
    BlockSums b;
    b.resid = sr;
    b.p = sp;
    P.blocks[(int64_t)r * P.nblocks + blk] = b;
  }
}

// ---------------------------------------------------------------------------------------------
// Kernel 3: block choice, token choice, outputs.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ bool better(double v, int32_t i, double bv, int32_t bi) {
  if (bi < 0) return i >= 0;
  if (i < 0) return false;
  return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void argmax_block(double* v, int32_t* i, double* sv, int32_t* si) {
  for (int o = 16; o > 0; o >>= 1) {
    const double ov = __shfl_xor_sync(0xffffffffu, *v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, *i, o);
    if (better(ov, oi, *v, *i)) {
      *v = ov;
      *i = oi;
    }
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) {
    sv[threadIdx.x >> 5] = *v;
    si[threadIdx.x >> 5] = *i;
  }
  __syncthreads();
  double bv = sv[0];
  int32_t bi = si[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
    if (better(sv[w], si[w], bv, bi)) {
      bv = sv[w];
      bi = si[w];
    }
  __syncthreads();
  *v = bv;
  *i = bi;
}

// The CTA's Gumbel-max draw among ids [lo, hi) (thread t takes lo + t, lo + t + blockDim.x, ...):
// the id maximising log w + G(seed, step, pos, id, salt) over the ids of positive weight w =
// weight(id), ties to the lower id; -1 when no weight is positive. Every thread gets it.
template <class Weight>
__device__ __forceinline__ int32_t gumbel_pick(int32_t lo, int32_t hi, const Req& q, uint32_t pos,
                                               uint32_t salt, const Weight& weight, double* s_v,
                                               int32_t* s_i) {
  double bv = 0;
  int32_t bi = -1;
  for (int32_t t = lo + threadIdx.x; t < hi; t += blockDim.x) {
    const double w = weight(t);
    if (!(w > 0)) continue;
    const double v = log(w) + gumbel(q.seed, q.step, pos, (uint32_t)t, salt);
    if (better(v, t, bv, bi)) {
      bv = v;
      bi = t;
    }
  }
  argmax_block(&bv, &bi, s_v, s_i);
  return bi;
}

__global__ void __launch_bounds__(kFinishThreads) finish_kernel(Params P) {
  __shared__ Decision s_d;
  __shared__ int32_t s_any;
  __shared__ double s_v[32];
  __shared__ int32_t s_i[32];
  const int32_t r = blockIdx.x;
  const Req q = request_of(P, r);
  if (threadIdx.x == 0) {
    s_d = decide(P, r, q);
    s_any = 0;
  }
  __syncthreads();
  const Decision d = s_d;
  const BlockSums* bs = P.blocks + (int64_t)r * P.nblocks;
  // Residual or, when it is all zero, p itself (the CPU's rule).
  if (d.residual) {
    int32_t any = 0;
    for (int32_t b = threadIdx.x; b < P.nblocks; b += blockDim.x) any |= bs[b].resid > 0;
    if (any) atomicOr(&s_any, 1);
  }
  __syncthreads();
  const bool use_resid = d.residual && s_any != 0;
  const int32_t i = d.acc;
  // Winning block, then the token in it.
  const int32_t bi = gumbel_pick(0, P.nblocks, q, (uint32_t)i, kSaltVerifyBlock, [&](int32_t b) {
    return use_resid ? bs[b].resid : bs[b].p;
  }, s_v, s_i);
  const RowRef tw = target_row(P, r, i, q);
  const RowInfo ti = target_info(P, r, i);
  RowRef dw = tw;
  RowInfo di = ti;
  if (use_resid) {
    dw = draft_row(P, r, i, q);
    di = draft_info(P, r, i);
  }
  int32_t tok = 0;  // every weight zero: token 0 (as the CPU's two-level sampler)
  if (bi >= 0) {
    const int32_t lo = bi * kBlockSize, hi = min(P.V, lo + kBlockSize);
    const int32_t t = gumbel_pick(lo, hi, q, (uint32_t)i, kSaltVerifyToken, [&](int32_t c) {
      const float pt = prob_of(tw, ti, q.min_p, c, P.V);
      double wgt = (double)pt;
      if (use_resid) wgt = (double)pt - (double)prob_of(dw, di, q.min_p, c, P.V);
      return wgt;
    }, s_v, s_i);
    if (t >= 0) tok = t;
  }
  // Outputs (n + 1 entries per request) and the request's status.
  const int32_t W = P.n + 1;
  for (int32_t e = threadIdx.x; e < W; e += blockDim.x) {
    int32_t o = -1;
    float lp = -INFINITY;
    if (e <= d.acc) {
      o = e < d.acc ? P.draft_tokens[(int64_t)r * P.n + e] : tok;
      const float pv = prob_of(target_row(P, r, e, q), target_info(P, r, e), q.min_p, o, P.V);
      lp = pv > 0.f ? (float)log((double)pv) : -INFINITY;
    }
    P.out_tokens[(int64_t)r * W + e] = o;
    if (P.out_logprobs) P.out_logprobs[(int64_t)r * W + e] = lp;
  }
  if (threadIdx.x == 0) {
    P.accepted[r] = d.acc;
    if (P.request_status) {
      int32_t st = q.status;
      for (int32_t e = 0; e <= q.nr; ++e)
        if (target_info(P, r, e).mode == kModeEmpty) st |= kReqEmptyRow;
      for (int32_t e = 0; e < q.nr; ++e) {
        if (draft_info(P, r, e).mode == kModeEmpty) st |= kReqEmptyRow;
        const int32_t d = P.draft_tokens[(int64_t)r * P.n + e];
        if (d < 0 || d >= P.V) st |= kReqBadTokenId;
      }
      P.request_status[r] = st;
    }
  }
}

inline cudaError_t launch_verify(const Params& P, cudaStream_t stream) {
  const int64_t rows = (int64_t)P.num_requests * (2 * P.n + 1);
  const bool mask = P.allowed != nullptr;
  launch_kernel(stream, mask ? row_kernel<true> : row_kernel<false>, (unsigned)rows, kRowThreads, 0, P);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int64_t chunks = (P.nblocks + kBlockWarps - 1) / kBlockWarps;
  launch_kernel(stream, mask ? block_kernel<true> : block_kernel<false>,
                (unsigned)(chunks * P.num_requests), kBlockWarps * 32, 0, P);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  launch_kernel(stream, finish_kernel, (unsigned)P.num_requests, kFinishThreads, 0, P);
  return cudaGetLastError();
}

}  // namespace verify
}  // namespace dds

#endif  // DDS_KERNELS_VERIFY_CUH_
