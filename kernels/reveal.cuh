// dds_reveal on the GPU: one CTA per request. Framework-free; the launcher takes plain pointers.
// Semantics: docs/decoding.md (the CPU reference is src/api_decode.cpp::cpu_reveal).
//
// Selection is by rank: a row is revealed iff its rank among the request's eligible rows, in the
// order (key desc, position asc, row asc), is below n. Ranks are counted exactly by comparing
// every pair of eligible rows (keys staged in shared memory tiles): O(m^2 / threads) per request,
// about 1 us for 256 rows and tens of us for 4096 rows in one request.
#ifndef DDS_KERNELS_REVEAL_CUH_
#define DDS_KERNELS_REVEAL_CUH_

#include <cuda_runtime.h>
#include <stdint.h>

#include "rng.h"

namespace dds {
namespace reveal {

constexpr int kThreads = 512;
constexpr int kTile = 1024;

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
};

__device__ __forceinline__ bool before(double ka, int32_t pa, int32_t ia, double kb, int32_t pb,
                                       int32_t ib) {
  // true if a ranks before b: key desc, position asc, row asc.
  if (ka != kb) return ka > kb;
  if (pa != pb) return pa < pb;
  return ia < ib;
}

__device__ __forceinline__ int32_t block_sum(int32_t v, int32_t* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  int32_t t = 0;
  for (int w = 0; w < kThreads / 32; ++w) t += red[w];
  __syncthreads();
  return t;
}

__device__ __forceinline__ int32_t block_min(int32_t v, int32_t* red) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  int32_t t = INT32_MAX;
  for (int w = 0; w < kThreads / 32; ++w) t = min(t, red[w]);
  __syncthreads();
  return t;
}

__global__ void __launch_bounds__(kThreads) reveal_kernel(Params p) {
  __shared__ double s_key[kTile];
  __shared__ int32_t s_pos[kTile];
  __shared__ int32_t s_row[kTile];
  __shared__ int32_t s_red[kThreads / 32];
  const int32_t r = blockIdx.x;
  // Device row offsets are clamped to [0, num_rows) so that bad ones never read or write out of
  // bounds (the CPU backend rejects them on the host).
  const int32_t b = min(max(p.row_offsets ? p.row_offsets[r] : r, 0), p.num_rows);
  const int32_t e = min(max(p.row_offsets ? p.row_offsets[r + 1] : r + 1, b), p.num_rows);
  int32_t nrows = e > b ? e - b : 0;
  if (nrows > kThreads * 8) {  // more than the register-resident ranks hold: not processed
    for (int32_t j = threadIdx.x; j < nrows; j += kThreads) p.reveal[b + j] = 0;
    if (threadIdx.x == 0) {
      if (p.num_revealed) p.num_revealed[r] = 0;
      if (p.finished) p.finished[r] = 0;
      if (p.request_status) p.request_status[r] = 1024;  // DDS_REQ_TOO_MANY_ROWS
    }
    return;
  }
  int32_t* canvas = p.canvas ? p.canvas + (int64_t)r * p.canvas_stride : nullptr;
  int32_t status = 0;

  // First EOS already in the canvas.
  int32_t first_eos = INT32_MAX;
  if (canvas && p.eos_token >= 0) {
    int32_t local = INT32_MAX;
    for (int32_t q = threadIdx.x; q < p.canvas_length; q += kThreads)
      if (canvas[q] == p.eos_token) {
        local = q;
        break;
      }
    first_eos = block_min(local, s_red);
  }
  int32_t policy = p.policies ? p.policies[r] : p.policy;
  if (policy < 0 || policy > 3) {
    policy = 0;
    status |= 256;  // DDS_REQ_BAD_POLICY
  }
  const uint64_t seed = p.seeds ? p.seeds[r] : p.seed;
  const uint32_t step = p.steps ? p.steps[r] : p.step;
  float tau = p.position_temperatures ? p.position_temperatures[r] : p.position_temperature;
  if (!(tau > 0.f) || isinf(tau)) tau = 0.f;

  // Keys: -inf marks an ineligible row (never selected; excluded from ranks via the flag).
  auto eligible_of = [&](int32_t i, int32_t pos, bool* bad_pos) {
    bool ok = p.eligible ? p.eligible[i] != 0 : true;
    if (canvas && (pos < 0 || pos >= p.canvas_length)) {
      if (ok) *bad_pos = true;
      ok = false;
    }
    if (ok && first_eos != INT32_MAX && pos > first_eos) ok = false;
    return ok;
  };
  auto key_of = [&](int32_t i, int32_t pos) -> double {
    const float s = p.scores[i];
    double k = isnan(s) ? -INFINITY : (double)s;
    if (policy == 3) {
      k = (double)(random_bits(seed, step, (uint32_t)pos, 0u, kSaltReveal) >> 11);
    } else if (policy == 0 && tau > 0.f) {
      k = k / (double)tau + gumbel(seed, step, (uint32_t)pos, 1u, kSaltReveal);
    }
    return k;
  };

  // Pass 1: eligible count, bad positions, threshold count.
  const float thr = p.thresholds ? p.thresholds[r] : p.threshold;
  int32_t m_local = 0, thr_local = 0, bad_local = 0;
  for (int32_t j = threadIdx.x; j < nrows; j += kThreads) {
    const int32_t i = b + j;
    const int32_t pos = p.positions ? p.positions[i] : j;
    bool bad = false;
    const bool ok = eligible_of(i, pos, &bad);
    bad_local |= bad;
    if (ok) {
      ++m_local;
      const float s = p.scores[i];
      if (!isnan(s) && (double)s >= (double)thr) ++thr_local;
    }
  }
  const int32_t m = block_sum(m_local, s_red);
  const int32_t n_thr = block_sum(thr_local, s_red);
  if (block_sum(bad_local, s_red) > 0) status |= 512;  // DDS_REQ_BAD_POSITION

  // n for the count-based policies.
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
    }
  }
  const float f = p.factors ? p.factors[r] : p.factor;

  // Pass 2: ranks (each thread owns rows j = threadIdx.x + k * kThreads).
  constexpr int kMaxOwn = 8;  // up to kThreads * 8 = 4096 rows per request, ranked in registers
  int32_t rank[kMaxOwn];
  double own_key[kMaxOwn];
  int32_t own_pos[kMaxOwn];
  bool own_ok[kMaxOwn];
#pragma unroll
  for (int k = 0; k < kMaxOwn; ++k) {
    rank[k] = 0;
    own_ok[k] = false;
    const int32_t j = threadIdx.x + k * kThreads;
    if (j < nrows) {
      const int32_t i = b + j;
      const int32_t pos = p.positions ? p.positions[i] : j;
      bool bad = false;
      own_ok[k] = eligible_of(i, pos, &bad);
      own_pos[k] = pos;
      own_key[k] = own_ok[k] ? key_of(i, pos) : 0.0;
    }
  }
  if (m > 0) {
    for (int32_t t0 = 0; t0 < nrows; t0 += kTile) {
      __syncthreads();
      for (int32_t t = threadIdx.x; t < kTile; t += kThreads) {
        const int32_t j = t0 + t;
        s_row[t] = -1;
        if (j < nrows) {
          const int32_t i = b + j;
          const int32_t pos = p.positions ? p.positions[i] : j;
          bool bad = false;
          if (eligible_of(i, pos, &bad)) {
            s_key[t] = key_of(i, pos);
            s_pos[t] = pos;
            s_row[t] = j;
          }
        }
      }
      __syncthreads();
      const int32_t lim = min(kTile, nrows - t0);
#pragma unroll
      for (int k = 0; k < kMaxOwn; ++k) {
        const int32_t j = threadIdx.x + k * kThreads;
        if (j >= nrows || !own_ok[k]) continue;
        int32_t c = 0;
        for (int32_t t = 0; t < lim; ++t)
          c += (s_row[t] >= 0 && before(s_key[t], s_pos[t], s_row[t], own_key[k], own_pos[k], j));
        rank[k] += c;
      }
    }
  }
  // FACTOR: n = first rank k (1-based, k >= 2) whose score fails c_k >= 1 - f / (k + 1), minus 1.
  if (policy == 2 && m > 0) {
    int32_t fail_local = INT32_MAX;
#pragma unroll
    for (int k = 0; k < kMaxOwn; ++k) {
      const int32_t j = threadIdx.x + k * kThreads;
      if (j >= nrows || !own_ok[k]) continue;
      const int32_t kk = rank[k] + 1;
      if (kk >= 2 && !(own_key[k] >= 1.0 - (double)f / (double)(kk + 1)))
        fail_local = min(fail_local, kk);
    }
    const int32_t first_fail = block_min(fail_local, s_red);
    n = first_fail == INT32_MAX ? m : first_fail - 1;
    n = max(n, 1);
  }
  // Outputs.
#pragma unroll
  for (int k = 0; k < kMaxOwn; ++k) {
    const int32_t j = threadIdx.x + k * kThreads;
    if (j >= nrows) continue;
    const int32_t i = b + j;
    const bool rev = own_ok[k] && rank[k] < n;
    p.reveal[i] = rev ? 1 : 0;
    if (rev && canvas) canvas[own_pos[k]] = p.tokens[i];
  }
  if (p.num_revealed && threadIdx.x == 0) p.num_revealed[r] = n;
  if (p.finished) {
    __syncthreads();
    int32_t fin = 0;
    if (canvas && p.eos_token >= 0) {
      int32_t local = INT32_MAX;
      for (int32_t q = threadIdx.x; q < p.canvas_length; q += kThreads)
        if (canvas[q] == p.eos_token) {
          local = q;
          break;
        }
      const int32_t eos = block_min(local, s_red);
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

// Rows per request above this are not supported by the register-resident ranks.
constexpr int32_t kMaxRowsPerRequest = kThreads * 8;

inline cudaError_t launch_reveal(const Params& p, cudaStream_t stream) {
  reveal_kernel<<<p.num_requests, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace reveal
}  // namespace dds

#endif  // DDS_KERNELS_REVEAL_CUH_
