// dds_reveal on the GPU: one CTA per request. Framework-free; the launcher takes plain pointers.
// Semantics: docs/decoding.md (the CPU reference is src/api_decode.cpp::cpu_reveal).
//
// Selection is by rank: a row is revealed iff its rank among the request's eligible rows, in the
// order (key desc, position asc, row asc), is below n. The n-th row of that order is found by a
// radix select (8-bit digits) over order-preserving 64-bit images of the key, then of (position,
// row) among rows whose key ties with it; a row is revealed iff it is at or above that row.
// O(m) per pass, 8 passes (16 with a tie at the boundary); FACTOR binary-searches n with selects
// of the k-th key (its test is monotone in k for f >= 0); ENTROPY_BOUND ranks by -entropy and
// binary-searches the longest prefix (its test, the sum of the k - 1 lowest entropies with
// negatives as 0 against the bound, is monotone in k), summing each probe's prefix in float64 in
// one pass (another summation order than the CPU's: the two can differ only where a prefix sum
// ties with the bound within rounding). No limit on rows per request; the keys live in the
// workspace (two uint64 per row).
#ifndef DDS_KERNELS_REVEAL_CUH_
#define DDS_KERNELS_REVEAL_CUH_

#include <cuda_runtime.h>
#include <stdint.h>

#include "../common/launch.cuh"
#include "../common/offsets.h"
#include "../common/rng.h"
#include "../common/status.h"
#include "../common/warp.cuh"

namespace dds {
namespace reveal {

constexpr int kThreads = 512;

struct Params {
  int32_t num_rows;
  int32_t num_requests;
  const int32_t* row_offsets;  // may be null: one row per request
  const int32_t* positions;
  const float* scores;
  const uint8_t* eligible;
  const int32_t* policies;
  int32_t policy;
  const int32_t* counts;
  int32_t count;
  const int32_t* steps_left;
  const float* thresholds;
  float threshold;
  const float* factors;
  float factor;
  const float* position_temperatures;
  float position_temperature;
  const float* entropy_bounds;  // ENTROPY_BOUND: [num_requests] or null -> entropy_bound
  float entropy_bound;
  const uint64_t* seeds;
  uint64_t seed;
  const uint32_t* steps;
  uint32_t step;
  int32_t* canvas;
  int64_t canvas_stride;
  int32_t canvas_length;
  const int32_t* tokens;
  int32_t mask_token;
  int32_t eos_token;
  uint8_t* reveal;
  int32_t* num_revealed;
  int32_t* finished;
  int32_t* request_status;
  uint64_t* ws_key;  // scratch [num_rows]: ranking key image (0 = not eligible)
  uint64_t* ws_tie;  // scratch [num_rows]: (position, row) tie-break image
};

// The CTA's reduction of v by op (a butterfly in each warp, then the warps' results in warp
// order from red[kThreads / 32], starting from init): every thread gets it. The barriers around
// it let the caller reuse red right after.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, T* red, T init, Op op) {
  v = kwarp::warp_reduce(v, op);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  T t = init;
  for (int w = 0; w < kThreads / 32; ++w) t = op(t, red[w]);
  __syncthreads();
  return t;
}
using kwarp::AddOp;
__device__ __forceinline__ int32_t block_sum(int32_t v, int32_t* red) {
  return block_reduce(v, red, 0, AddOp{});
}
__device__ __forceinline__ double block_sum_d(double v, double* red) {
  return block_reduce(v, red, 0.0, AddOp{});
}
__device__ __forceinline__ int32_t block_min(int32_t v, int32_t* red) {
  return block_reduce(v, red, (int32_t)INT32_MAX, [](int32_t a, int32_t b) { return min(a, b); });
}

// The first position of `eos` in a request's canvas (INT32_MAX: none), by the CTA.
__device__ __forceinline__ int32_t canvas_eos(const int32_t* canvas, int32_t length, int32_t eos,
                                              int32_t* red) {
  int32_t local = INT32_MAX;
  for (int32_t q = threadIdx.x; q < length; q += kThreads)
    if (canvas[q] == eos) {
      local = q;
      break;
    }
  return block_min(local, red);
}

// Order-preserving 64-bit image of a ranking key (larger key -> larger integer; -0 == +0).
// Never 0 for a non-NaN double: 0 marks an ineligible row.
__device__ __forceinline__ uint64_t ord_key(double k) {
  uint64_t b = (uint64_t)__double_as_longlong(k == 0.0 ? 0.0 : k);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}
__device__ __forceinline__ double key_from_ord(uint64_t o) {
  const uint64_t b = (o >> 63) ? (o & 0x7fffffffffffffffull) : ~o;
  return __longlong_as_double((long long)b);
}
// Tie-break image of (position asc, row asc): larger ranks first.
__device__ __forceinline__ uint64_t tie_key(int32_t pos, int32_t j) {
  const uint32_t up = (uint32_t)pos ^ 0x80000000u;
  return ((uint64_t)(~up) << 32) | (uint64_t)(~(uint32_t)j);
}

// Binary search: the largest n in [1, m] with pass(n), for a pass that holds up to some n and
// fails after it (1 when only pass(1) can hold; pass(1) is not called).
template <class Pass>
__device__ __forceinline__ int32_t last_pass(int32_t m, const Pass& pass) {
  int32_t lo = 1, hi = m;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (pass(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

struct SelSmem {
  uint32_t hist[256];
  uint64_t chosen;
  int32_t krem;
  int32_t cnt;
};

// Radix select (8-bit digits, warp-aggregated shared-memory counts, warp-parallel bucket scan):
// the k-th largest (1-based) value among the request's eligible rows (pk != 0) of pk, or, with
// TIE, of tb among the rows whose pk equals `eq`. *krem_out = the rank of the k-th among the
// rows equal to the returned value, *cnt_out = how many rows hold that value. Needs
// 1 <= k <= size of the set.
template <bool TIE>
__device__ uint64_t select_kth(const uint64_t* pk, const uint64_t* tb, int32_t nrows, uint64_t eq,
                               int32_t k, int32_t* krem_out, int32_t* cnt_out, SelSmem& sm) {
  uint64_t prefix = 0, mask = 0;
  int32_t krem = k, cnt = 0;
  const int lane = threadIdx.x & 31;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int q = threadIdx.x; q < 256; q += kThreads) sm.hist[q] = 0;
    __syncthreads();
    for (int32_t j0 = 0; j0 < nrows; j0 += kThreads) {
      const int32_t j = j0 + threadIdx.x;
      int d = 256;
      if (j < nrows) {
        const uint64_t a = pk[j];
        if (a != 0 && (!TIE || a == eq)) {
          const uint64_t v = TIE ? tb[j] : a;
          if ((v & mask) == prefix) d = (int)((v >> shift) & 255u);
        }
      }
      const unsigned peers = __match_any_sync(0xffffffffu, d);
      if (d < 256 && lane == __ffs(peers) - 1) atomicAdd(&sm.hist[d], (uint32_t)__popc(peers));
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane L owns buckets 255 - 8L down to 248 - 8L (descending order).
      uint32_t c[8];
      uint32_t sum = 0;
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        c[q] = sm.hist[255 - 8 * lane - q];
        sum += c[q];
      }
      const uint32_t incl = kwarp::warp_incl_scan(sum, lane);
      const uint32_t excl = incl - sum;
      if (excl < (uint32_t)krem && (uint32_t)krem <= incl) {
        uint32_t cum = excl;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          if (cum + c[q] >= (uint32_t)krem) {
            sm.chosen = (uint64_t)(255 - 8 * lane - q);
            sm.krem = krem - (int32_t)cum;
            sm.cnt = (int32_t)c[q];
            break;
          }
          cum += c[q];
        }
      }
    }
    __syncthreads();
    prefix |= sm.chosen << shift;
    mask |= (uint64_t)255u << shift;
    krem = sm.krem;
    cnt = sm.cnt;
    __syncthreads();
  }
  *krem_out = krem;
  *cnt_out = cnt;
  return prefix;
}

__global__ void __launch_bounds__(kThreads) reveal_kernel(Params p) {
  __shared__ int32_t s_red[kThreads / 32];
  __shared__ double s_red_d[kThreads / 32];
  __shared__ SelSmem sm;
  const int32_t r = blockIdx.x;
  // The row_offsets rule (common/offsets.h): the CTA handles the rows [b, e) the search gives
  // request r (a partition of the rows: no two CTAs write one row): its own rows when its offsets
  // are good, else its orphan rows, never eligible. Default position: i - row_offsets[r].
  const int32_t rb = p.row_offsets ? p.row_offsets[r] : r;
  const bool rows_ok = offsets::good(rb, p.row_offsets ? p.row_offsets[r + 1] : r + 1, r,
                                     p.num_requests, p.num_rows);
  int32_t b, e;
  offsets::rows_of(p.row_offsets, p.num_requests, p.num_rows, r, &b, &e);
  const int32_t nrows = e - b, d = rows_ok ? b - rb : 0;  // (orphan rows: no position used)
  int32_t* canvas = p.canvas ? p.canvas + (int64_t)r * p.canvas_stride : nullptr;
  int32_t status = rows_ok ? 0 : kReqBadRowOffsets;
  uint64_t* pk = p.ws_key + b;
  uint64_t* tb = p.ws_tie + b;

  // First EOS already in the canvas.
  int32_t first_eos = INT32_MAX;
  if (canvas && p.eos_token >= 0)
    first_eos = canvas_eos(canvas, p.canvas_length, p.eos_token, s_red);
  int32_t policy = p.policies ? p.policies[r] : p.policy;
  if (policy < 0 || policy > 4) {
    policy = 0;
    status |= kReqBadPolicy;
  }
  float bound = 0.f;  // ENTROPY_BOUND: NaN or negative -> 0, flagged
  if (policy == 4) {
    bound = p.entropy_bounds ? p.entropy_bounds[r] : p.entropy_bound;
    if (isnan(bound) || bound < 0.f) {
      bound = 0.f;
      status |= kReqBadEntropyBound;
    }
  }
  const uint64_t seed = p.seeds ? p.seeds[r] : p.seed;
  const uint32_t step = p.steps ? p.steps[r] : p.step;
  float tau = p.position_temperatures ? p.position_temperatures[r] : p.position_temperature;
  if (isnan(tau) || tau < 0.f) status |= kReqBadRevealParam;
  if (!(tau > 0.f) || isinf(tau)) tau = 0.f;
  const float thr = p.thresholds ? p.thresholds[r] : p.threshold;
  if (isnan(thr)) status |= kReqBadRevealParam;
  if (p.factors && (!isfinite(p.factors[r]) || p.factors[r] < 0.f)) status |= kReqBadRevealParam;

  // Pass 1: eligibility, ranking keys (to the workspace), counts.
  int32_t m_local = 0, thr_local = 0, bad_local = 0;
  for (int32_t j = threadIdx.x; j < nrows; j += kThreads) {
    const int32_t i = b + j;
    const int32_t pos = p.positions ? p.positions[i] : j + d;
    bool ok = rows_ok && (p.eligible ? p.eligible[i] != 0 : true);
    if (canvas && (pos < 0 || pos >= p.canvas_length)) {
      if (ok) bad_local = 1;
      ok = false;
    }
    if (ok && first_eos != INT32_MAX && pos > first_eos) ok = false;
    uint64_t key = 0;
    if (ok) {
      ++m_local;
      const float s = p.scores[i];
      if (!isnan(s) && (double)s >= (double)thr) ++thr_local;
      double k = isnan(s) ? -INFINITY : (double)s;
      if (policy == 4) {
        k = isnan(s) ? -INFINITY : -(double)s;  // ascending entropy; NaN entropy = +inf
      } else if (policy == 3) {
        k = (double)(random_bits(seed, step, (uint32_t)pos, 0u, kSaltReveal) >> 11);
      } else if (policy == 0 && tau > 0.f) {
        k = k / (double)tau + gumbel(seed, step, (uint32_t)pos, 1u, kSaltReveal);
      }
      key = ord_key(k);
    }
    pk[j] = key;
    tb[j] = tie_key(pos, j);
  }
  const int32_t m = block_sum(m_local, s_red);
  const int32_t n_thr = block_sum(thr_local, s_red);
  if (block_sum(bad_local, s_red) > 0) status |= kReqBadPosition;

  // How many.
  int32_t n = 0;
  if (m > 0) {
    if (policy == 0 || policy == 3) {
      n = p.counts ? p.counts[r] : p.count;
      if (n <= 0) {
        if (p.steps_left) {
          const int32_t sl = max(1, p.steps_left[r]);
          n = (int32_t)(((int64_t)m + sl - 1) / sl);
        } else {
          n = 1;
        }
      }
      n = min(n, m);
    } else if (policy == 1) {
      n = max(n_thr, 1);
    } else if (policy == 4) {
      // ENTROPY_BOUND: the largest n whose n - 1 lowest entropies (negatives as 0) sum to at
      // most the bound. The sum of the top k - 1 keys: every row above the (k-1)-th key's value
      // kv, plus krem rows at kv.
      auto pass = [&](int32_t k) {
        if (k <= 1) return true;
        int32_t krem, cnt;
        const uint64_t kv = select_kth<false>(pk, tb, nrows, 0, k - 1, &krem, &cnt, sm);
        double local = 0;
        for (int32_t j = threadIdx.x; j < nrows; j += kThreads) {
          const uint64_t a = pk[j];
          if (a != 0 && a > kv) local += fmax(0.0, -key_from_ord(a));
        }
        const double sum = block_sum_d(local, s_red_d) + (double)krem * fmax(0.0, -key_from_ord(kv));
        return sum <= (double)bound;
      };
      n = last_pass(m, pass);
    } else {
      // FACTOR: the largest n with c_k >= 1 - f / (k + 1) for every 2 <= k <= n (at least 1).
      // For f >= 0 the test is monotone in k (c_k falls, the bound rises): binary search over
      // k-th largest scores; otherwise (a bad device value) probe k = 2, 3, ... in order.
      const float f = p.factors ? p.factors[r] : p.factor;
      int32_t kr, cn;
      auto pass = [&](int32_t k) {
        const double c = key_from_ord(select_kth<false>(pk, tb, nrows, 0, k, &kr, &cn, sm));
        return c >= 1.0 - (double)f / (double)(k + 1);
      };
      if (f >= 0.f) {
        n = last_pass(m, pass);
      } else {
        n = 1;
        while (n < m && pass(n + 1)) ++n;
      }
    }
  }
  // The n-th row in the order (key desc, position asc, row asc): (kn, tn).
  uint64_t kn = ~0ull, tn = ~0ull;
  if (n > 0) {
    int32_t krem, cnt;
    kn = select_kth<false>(pk, tb, nrows, 0, n, &krem, &cnt, sm);
    tn = 0;  // every row with key kn is inside the first n
    if (krem < cnt) {
      int32_t k2, c2;
      tn = select_kth<true>(pk, tb, nrows, kn, krem, &k2, &c2, sm);
    }
  }
  // Outputs.
  for (int32_t j = threadIdx.x; j < nrows; j += kThreads) {
    const int32_t i = b + j;
    const uint64_t a = pk[j];
    const bool rev = n > 0 && a != 0 && (a > kn || (a == kn && tb[j] >= tn));
    p.reveal[i] = rev ? 1 : 0;
    if (rev && canvas) canvas[p.positions ? p.positions[i] : j + d] = p.tokens[i];
  }
  if (p.num_revealed && threadIdx.x == 0) p.num_revealed[r] = n;
  if (p.finished) {
    __syncthreads();
    int32_t fin = 0;
    if (canvas && p.eos_token >= 0) {
      const int32_t eos = canvas_eos(canvas, p.canvas_length, p.eos_token, s_red);
      if (eos != INT32_MAX) {
        int32_t masked = 0;
        for (int32_t q = threadIdx.x; q < eos; q += kThreads) masked |= canvas[q] == p.mask_token;
        fin = block_sum(masked, s_red) == 0 ? 1 : 0;
      }
    }
    if (threadIdx.x == 0) p.finished[r] = fin;
  }
  if (p.request_status && threadIdx.x == 0) p.request_status[r] = status;
}

// Workspace: two 64-bit keys per row.
inline size_t workspace_bytes(int32_t max_rows) {
  return 2 * sizeof(uint64_t) * (size_t)(max_rows > 0 ? max_rows : 1);
}

inline cudaError_t launch_reveal(const Params& p, cudaStream_t stream) {
  launch_kernel(stream, reveal_kernel, (unsigned)p.num_requests, kThreads, 0, p);
  return cudaGetLastError();
}

}  // namespace reveal
}  // namespace dds

#endif  // DDS_KERNELS_REVEAL_CUH_
