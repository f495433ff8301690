// dds_stash_logprobs on the GPU (docs/sampling.md §7; the CPU backend's stash() is the oracle).
//
// Shape: one persistent launch. Every CTA first turns the per-request keep flags into a prefix
// count of kept rows in shared memory (keep is read before anything else of a request; requests
// not kept never cost more than that flag), so the work is a dense list of K kept rows. Each kept
// row is cut into P contiguous chunks of 1024-token tiles (P chosen on the device from K, so that a
// few kept rows still fill the GPU) and every (row, chunk) item is handled by ONE WARP: one HBM
// read of the chunk, 32 values per lane in registers per tile, and in the same pass
//   - the running max and sum of exp(v - M) (fp32 within a tile, float64 across tiles),
//   - the top-n candidates as order-preserving 64-bit keys (value bits high, inverted index low:
//     keys are distinct and ties go to the lower id), kept in a per-warp sorted list; a tile is
//     only looked at when some lane's maximum reaches the list's threshold, and while the list is
//     not full the n-th largest lane maximum of the tile bounds it (n <= 32),
//   - for given ids (committed tokens, the request's own ids) the count of strictly greater
//     values, through a histogram over the sorted given values.
// The list lives in one register per lane while it holds <= 32 keys (shared memory beyond).
// 16-bit logits are kept packed and two tiles are loaded before either is processed (4 KB per warp
// in flight, as for one f32 tile).
// With P > 1 each warp writes a partial (M, S, keys, counts) to the workspace and bumps a per-row
// counter; the warp that arrives last merges the partials (a k-way merge of the sorted lists
// staged in shared memory for n <= 32), writes the row and resets the counter (so the counters
// are zero at rest: graph-safe, no memset).
// Values: v = (sanitised logit) * (1/T) in fp32 exactly as the CPU; log-prob = (v - M) - log S in
// float64 with S the sum of exp(v - M) (fp32 within a tile, float64 across tiles and partials).
//
// V2 (template flag; DDS_STASH_V2=1 in src/cuda_stash.cu): the same work split, the same sums in
// the same order and the same lists, so the same output bits on the same grid, with a shorter
// chain of dependent steps (small problems are latency-bound):
//   - <= 256 requests: a thread per request loads its keep flag and its fields in one round trip
//     and the counts are scanned in registers (v1: flags, barrier, fields, three-barrier scan);
//   - the chunk-count walk unrolled (its 32 shuffles independent);
//   - top-n (n <= 32): each lane marks its candidates in a mask; one candidate per lane per batch,
//     merged into the list by counting ranks (one or two: the warp insertion), instead of a
//     warp-wide insertion per candidate; the first tile's bound (n-th largest lane maximum) by
//     counting instead of a 15-step bitonic sort;
//   - the merge: the headers and the lists loaded together, then the top n by rank among the
//     keys >= tau (the n-th largest of a sample of the lists' heads), instead of n rounds of a
//     warp-wide 64-bit maximum;
//   - 16-bit tiles in a rolling two-tile pipeline (a tile's load issued as the tile two before
//     it is done). V2 = 2 (DDS_STASH_V2=2) is v2 without this pipeline (v1's pair loads): v2
//     was slower than v1 on large 16-bit rows (4096 x 262144 bf16 all kept n = 5: 658 vs 560 us,
//     ninth session) but not on f32, which has no pipeline, so mode 2 is the candidate default
//     that keeps v2's shorter latency on small problems (not yet timed on a device).
#ifndef DDS_KERNELS_STASH_CUH_
#define DDS_KERNELS_STASH_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "../common/device.cuh"

namespace dds {
namespace stash {

constexpr int kTile = 1024;
constexpr int kMaxWarps = 8;
constexpr int kMinTilesPerItem = 2;
constexpr int kStageFloats = 32 * 33;  // padded [i][lane] staging of one tile
constexpr int kStageKeys = kStageFloats / 2;  // keys that fit the staging area (k-way merge)
constexpr int32_t kReqBadTemperature = 1;
constexpr int32_t kReqBadSlot = 128;

struct Params {
  int32_t V;
  int32_t num_rows, num_requests;
  const int32_t* row_offsets;
  const void* logits;
  int64_t row_stride;
  const uint8_t* keep;
  const int32_t* slots;
  const int32_t* num_valid;
  const float* temperatures;
  float temperature;
  const int32_t* committed;
  const int32_t* token_ids;
  const int32_t* num_token_ids;
  int32_t n;  // num_top
  int32_t logits_mode;
  int32_t num_slots, rows_per_slot;
  int32_t* out_tok;
  float* out_val;
  int32_t* out_rank;
  int32_t* req_status;
  unsigned char* partials;  // workspace: partial_cap partials of partial_bytes
  int64_t partial_bytes;
  int32_t partial_cap;
  int32_t* counters;  // workspace: [max_rows], zero at rest
  int32_t cum_bytes;  // shared memory for the kept-row prefix (aligned)
  int32_t warp_bytes; // shared memory per warp (aligned)
};

// Per-warp shared memory layout (host and device agree through these).
__host__ __device__ inline int64_t align16(int64_t x) { return (x + 15) & ~(int64_t)15; }
__host__ __device__ inline int32_t list_len(int32_t n) { return n > 1 ? n : 1; }
__host__ __device__ inline int64_t warp_smem_bytes(int32_t n, bool count) {
  int64_t b = align16((int64_t)list_len(n) * 8) + kStageFloats * 4;
  if (count) b += align16((int64_t)5 * (n + 2) * 4);
  return align16(b);
}
// The v2 kernel (DDS_STASH_V2, see stash_kernel) appends a batch area per warp: 32 candidate keys,
// the old and the new list (32 keys each), after warp_smem_bytes(n, count).
constexpr int kBatchKeys = 3 * 32;
__host__ __device__ inline int64_t warp_smem_bytes_v2(int32_t n, bool count) {
  return warp_smem_bytes(n, count) + (int64_t)kBatchKeys * 8;
}
// The kernel mode a DDS_STASH_V2 value selects (src/cuda_stash.cu, the host emulation): unset,
// empty or 0: v1 (0); 2: mode 2; any other number: v2 (1).
inline int v2_mode_of(const char* e) {
  const int v = e != nullptr && *e != '\0' ? atoi(e) : 0;
  return v == 0 ? 0 : v == 2 ? 2 : 1;
}
__host__ __device__ inline int64_t partial_bytes(int32_t n) {
  return align16(16 + (int64_t)list_len(n) * 8 + (int64_t)(n + 1) * 4);
}


constexpr float kInf = __builtin_huge_valf();
constexpr unsigned kFull = 0xffffffffu;

// NaN -> -inf, +inf -> FLT_MAX, times invT, +inf -> FLT_MAX (exactly the CPU's order).
__device__ __forceinline__ float full_value(float x, float invT) {
  x = fminf(fmaxf(x, -kInf), FLT_MAX);
  return fminf(x * invT, FLT_MAX);
}
__device__ __forceinline__ uint64_t make_key(float v, int32_t idx) {
  uint32_t u = __float_as_uint(v);
  if (u == 0x80000000u) u = 0;  // -0 == +0
  const uint32_t o = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ((uint64_t)o << 32) | (uint64_t)(~(uint32_t)idx);
}
__device__ __forceinline__ float key_value(uint64_t k) {
  const uint32_t o = (uint32_t)(k >> 32);
  const uint32_t u = (o & 0x80000000u) ? (o & 0x7fffffffu) : ~o;
  return __uint_as_float(u);
}
__device__ __forceinline__ int32_t key_index(uint64_t k) { return (int32_t)(~(uint32_t)k); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ uint64_t warp_max_u64(uint64_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t u = __shfl_xor_sync(kFull, v, o);
    v = u > v ? u : v;
  }
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ __forceinline__ int warp_incl_scan(int v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static constexpr int VEC = 4;
  __device__ static float one(const float* p) { return __ldg(p); }
};
template <>
struct Elem<__nv_bfloat16> {
  static constexpr int VEC = 8;
  __device__ static float one(const __nv_bfloat16* p) {
    return __uint_as_float((uint32_t)__ldg(reinterpret_cast<const unsigned short*>(p)) << 16);
  }
};
template <>
struct Elem<__half> {
  static constexpr int VEC = 8;
  __device__ static float one(const __half* p) { return __half2float(__ldg(p)); }
};

// Element (within the tile) held by register i of lane `lane`.
template <typename T>
__device__ __forceinline__ int tile_elem(int i, int lane) {
  constexpr int VEC = Elem<T>::VEC;
  return ((i / VEC) * 32 + lane) * VEC + (i % VEC);
}

// One lane's share of one 1024-token tile in registers. f32: the values; 16-bit dtypes: the
// packed raw words (half the registers, so the next tile can be in flight while this one is
// processed), converted when used. get(i) is element tile_elem<T>(i, lane).
template <typename T>
struct Tile;
template <>
struct Tile<float> {
  float4 f[8];
  __device__ __forceinline__ void load(const float* p, int lane) {
    const float4* q = reinterpret_cast<const float4*>(p);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = __ldg(q + k * 32 + lane);
  }
  __device__ __forceinline__ void load_guarded(const float* p, int64_t len, int lane) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int e = tile_elem<float>(i, lane);
      reinterpret_cast<float*>(&f[i / 4])[i % 4] = (e < len) ? __ldg(p + e) : -kInf;
    }
  }
  __device__ __forceinline__ float get(int i) const {
    return reinterpret_cast<const float*>(&f[i / 4])[i % 4];
  }
  // max over the lane's values, NaN ignored (-inf if all are NaN / -inf)
  __device__ __forceinline__ float lane_max() const {
    float m = -kInf;
#pragma unroll
    for (int i = 0; i < 32; ++i) m = fmaxf(m, get(i));
    return m;
  }
};
template <typename T16>
struct Tile16 {
  uint4 w[4];
  __device__ __forceinline__ uint32_t word(int m) const {
    return reinterpret_cast<const uint32_t*>(&w[m / 4])[m % 4];
  }
  __device__ __forceinline__ void load(const T16* p, int lane) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = __ldg(q + k * 32 + lane);
  }
  __device__ __forceinline__ void load_guarded(const T16* p, int64_t len, int lane) {
    constexpr uint32_t kNegInf = std::is_same<T16, __nv_bfloat16>::value ? 0xff80u : 0xfc00u;
    const unsigned short* ps = reinterpret_cast<const unsigned short*>(p);
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const int e0 = tile_elem<T16>(2 * m, lane), e1 = e0 + 1;
      const uint32_t lo = (e0 < len) ? (uint32_t)__ldg(ps + e0) : kNegInf;
      const uint32_t hi = (e1 < len) ? (uint32_t)__ldg(ps + e1) : kNegInf;
      reinterpret_cast<uint32_t*>(&w[m / 4])[m % 4] = lo | (hi << 16);
    }
  }
  __device__ __forceinline__ float get(int i) const {
    const uint32_t x = word(i / 2);
    if constexpr (std::is_same<T16, __nv_bfloat16>::value) {
      return __uint_as_float((i & 1) ? (x & 0xffff0000u) : (x << 16));
    } else {
      return __half2float(__ushort_as_half((unsigned short)((i & 1) ? (x >> 16) : (x & 0xffffu))));
    }
  }
  __device__ __forceinline__ float lane_max() const {
    if constexpr (std::is_same<T16, __nv_bfloat16>::value) {
      // packed max (NaN ignored unless both are NaN), then the two halves
      __nv_bfloat162 m = *reinterpret_cast<const __nv_bfloat162*>(&w[0].x);
#pragma unroll
      for (int k = 1; k < 16; ++k) {
        const uint32_t x = word(k);
        m = __hmax2(m, *reinterpret_cast<const __nv_bfloat162*>(&x));
      }
      return fmaxf(fmaxf(__low2float(m), __high2float(m)), -kInf);
    } else {
      __half2 m = *reinterpret_cast<const __half2*>(&w[0].x);
#pragma unroll
      for (int k = 1; k < 16; ++k) {
        const uint32_t x = word(k);
        m = __hmax2(m, *reinterpret_cast<const __half2*>(&x));
      }
      return fmaxf(fmaxf(__low2float(m), __high2float(m)), -kInf);
    }
  }
};
template <>
struct Tile<__nv_bfloat16> : Tile16<__nv_bfloat16> {};
template <>
struct Tile<__half> : Tile16<__half> {};

// Inserts `key` (> *thr, uniform across the warp) into the warp's sorted (descending) list of
// `len` keys; *thr becomes the list's last key (0 while not full).
__device__ __forceinline__ void list_insert(uint64_t* lst, int len, uint64_t key, uint64_t* thr,
                                            int lane) {
  int pos = 0;
  for (int j0 = 0; j0 < len; j0 += 32) {
    const int j = j0 + lane;
    const bool gt = j < len && lst[j] > key;
    const unsigned b = __ballot_sync(kFull, gt);
    pos += __popc(b);
    if (b != kFull) break;
  }
  for (int j0 = (len - 1) & ~31; j0 >= (pos & ~31); j0 -= 32) {
    const int j = j0 + lane;
    const bool shift = j > pos && j < len;
    const uint64_t prev = shift ? lst[j - 1] : 0;
    __syncwarp();
    if (shift) lst[j] = prev;
    else if (j == pos) lst[j] = key;
    __syncwarp();
  }
  *thr = lst[len - 1];
}

struct WarpMem {
  uint64_t* lst;
  float* stage;
  float* ev;    // [n+1] value of each given entry
  int32_t* epos; // [n+1] its position among the sorted valid given values, -1 if none
  float* srt;   // [n+1] sorted valid given values
  int32_t* hist;  // [n+2]
  int32_t* ecnt;  // [n+1] #values strictly greater than entry e's value
  uint64_t* bat;  // v2: [kBatchKeys] batch insertion (candidates, old list, new list)
};

// MINB: CTAs of 256 threads per SM the registers are capped for (2: <= 128 registers, 3: <= 80).
// V2: 0 = v1; 1 = v2; 2 = v2 with v1's 16-bit tile loads (a pair of tiles loaded, both
// processed, instead of v2's rolling pipeline): the same outputs in all three (see the top).
template <typename T, bool COUNT, int MINB, int V2 = 0>
__global__ void __launch_bounds__(256, MINB) stash_kernel(const Params P) {
  DDS_DYNAMIC_SMEM(smem);
  __shared__ int32_t scan_tmp[kMaxWarps + 1];
  int32_t* cum = reinterpret_cast<int32_t*>(smem);
  const int R = P.num_requests;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nthreads = blockDim.x, nwarps = nthreads >> 5;

  // ---- 1. kept rows per request, prefix in shared memory; CTA 0 writes request_status ----
  int K;
  // v2: a request's keep flag and fields loaded together (one round trip instead of two; the
  // fields of a request not kept are read, not used); returns its kept-row count, writes its
  // status (CTA 0).
  auto req_count = [&](int r) -> int {
    const bool kp = P.keep == nullptr || P.keep[r] != 0;
    const int slot = P.slots ? P.slots[r] : r;
    int rb = P.row_offsets ? P.row_offsets[r] : r;
    int re = P.row_offsets ? P.row_offsets[r + 1] : r + 1;
    const int nvr = P.num_valid ? P.num_valid[r] : 0;
    const float Tm = P.temperatures ? P.temperatures[r] : P.temperature;
    int cnt = 0, status = 0;
    if (kp) {
      if (slot < 0 || slot >= P.num_slots) {
        status = kReqBadSlot;
      } else {
        rb = max(rb, 0);
        re = min(re, P.num_rows);
        const int nrows = max(re - rb, 0);
        int nv = P.num_valid ? nvr : nrows;
        nv = max(0, min(nv, min(nrows, P.rows_per_slot)));
        cnt = nv;
        if (isnan(Tm) || Tm < 0.f || isinf(Tm)) status |= kReqBadTemperature;
      }
    }
    if (blockIdx.x == 0 && P.req_status) P.req_status[r] = status;
    return cnt;
  };
  if (V2 && R <= nthreads) {
    // v2, one request per thread: the counts scanned in registers (a warp scan, the warps'
    // totals through shared memory).
    const int r = tid;
    const int cnt = r < R ? req_count(r) : 0;
    const int inc = warp_incl_scan(cnt, lane);
    if (lane == 31) scan_tmp[warp] = inc;
    __syncthreads();
    int off = 0, tot = 0;
    for (int w2 = 0; w2 < nwarps; ++w2) {
      const int v = scan_tmp[w2];
      off += w2 < warp ? v : 0;
      tot += v;
    }
    if (r < R) cum[r] = off + inc - cnt;
    if (tid == 0) cum[R] = tot;
    __syncthreads();
    K = tot;
  } else {
    if (V2) {
      // (a + b) in one pass
#pragma unroll 4
      for (int r = tid; r < R; r += nthreads) cum[r] = req_count(r);
    } else {
      // (a) keep flags (read first: nothing else of a request not kept is used), strided and
      // independent so that the loads overlap; (b) the rest for kept requests; (c) block scan.
#pragma unroll 4
      for (int r = tid; r < R; r += nthreads)
        cum[r] = (P.keep == nullptr || P.keep[r] != 0) ? 1 : 0;
      __syncthreads();
#pragma unroll 4
      for (int r = tid; r < R; r += nthreads) {
        int cnt = 0, status = 0;
        if (cum[r]) {
          const int slot = P.slots ? P.slots[r] : r;
          int rb = P.row_offsets ? P.row_offsets[r] : r;
          int re = P.row_offsets ? P.row_offsets[r + 1] : r + 1;
          const int nvr = P.num_valid ? P.num_valid[r] : 0;
          const float Tm = P.temperatures ? P.temperatures[r] : P.temperature;
          if (slot < 0 || slot >= P.num_slots) {
            status = kReqBadSlot;
          } else {
            rb = max(rb, 0);
            re = min(re, P.num_rows);
            const int nrows = max(re - rb, 0);
            int nv = P.num_valid ? nvr : nrows;
            nv = max(0, min(nv, min(nrows, P.rows_per_slot)));
            cnt = nv;
            if (isnan(Tm) || Tm < 0.f || isinf(Tm)) status |= kReqBadTemperature;
          }
        }
        if (blockIdx.x == 0 && P.req_status) P.req_status[r] = status;
        cum[r] = cnt;
      }
    }
    __syncthreads();
    {
      // Exclusive scan: each warp a contiguous segment, walked 32 consecutive entries at a time
      // (lane i the i-th: no shared-memory bank conflicts; a thread per `per` consecutive entries
      // had 16-way conflicts at 4096 requests), then the warps' totals.
      const int seg = (R + nwarps - 1) / nwarps;
      const int w0 = min(warp * seg, R), w1 = min(w0 + seg, R);
      int carry = 0;
      for (int b = w0; b < w1; b += 32) {
        const int r = b + lane;
        const int c = r < w1 ? cum[r] : 0;
        const int inc = warp_incl_scan(c, lane);
        if (r < w1) cum[r] = carry + inc - c;
        carry += __shfl_sync(kFull, inc, 31);
      }
      if (lane == 0) scan_tmp[warp] = carry;
      __syncthreads();
      if (warp == 0) {
        const int v = lane < nwarps ? scan_tmp[lane] : 0;
        const int s = warp_incl_scan(v, lane);
        __syncwarp();
        if (lane < nwarps) scan_tmp[lane] = s - v;
        if (lane == nwarps - 1) scan_tmp[kMaxWarps] = s;
      }
      __syncthreads();
      const int off = scan_tmp[warp];
      for (int r = w0 + lane; r < w1; r += 32) cum[r] += off;
      if (tid == 0) cum[R] = scan_tmp[kMaxWarps];
      __syncthreads();
    }
    K = cum[R];
  }
  if (K == 0) return;

  // ---- 2. items: (kept row q, chunk p), one warp each ----
  const int V = P.V;
  const int n = P.n;
  const int E = n + 1;
  const int64_t tiles = (V + kTile - 1) / kTile;
  const int TW = gridDim.x * nwarps;
  // Chunks per kept row: the count (<= tiles / kMinTilesPerItem, <= the partials' capacity)
  // whose items fill the resident warps best over whole rounds (within 3%: fewer chunks; the
  // first that fills 95% is taken).
  int Pn = 1;
  {
    int64_t pmax = tiles / kMinTilesPerItem;
    pmax = pmax < 1 ? 1 : pmax;
    const int64_t cap = P.partial_cap / K;
    if (pmax > cap) pmax = cap < 1 ? 1 : cap;
    // n <= 32: every partial list fits the staging area for the k-way merge
    if (list_len(n) <= 32) {
      const int64_t kcap = kStageKeys / list_len(n) < 32 ? kStageKeys / list_len(n) : 32;
      if (pmax > kcap) pmax = kcap;
    }
    if (pmax > 256) pmax = 256;
    // Lane i evaluates c = c0 + i (the 64-bit division and the float one in parallel: walked
    // one c at a time by every thread, this loop was ~40% of the instructions of a small call,
    // ncu 256 x 32000 bf16 1 in 16 kept), then the same first-fit walk over the 32 values.
    const int pm = (int)pmax;
    float best = -1.f;
    bool done = false;
    for (int c0 = 1; c0 <= pm && !done; c0 += 32) {
      const int c = c0 + lane;
      float eff = -1.f;
      if (c <= pm) {
        const int64_t it = (int64_t)K * c;
        const int64_t rounds = (it + TW - 1) / TW;
        eff = (float)it / (float)(rounds * TW);
      }
      if (V2) {
        // the same walk unrolled: the 32 shuffles are independent, only the compares chain
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const float e = __shfl_sync(kFull, eff, i);
          if (!done && c0 + i <= pm) {
            if (e > best * 1.03f) {
              best = e;
              Pn = c0 + i;
            }
            if (best >= 0.95f) done = true;
          }
        }
      } else {
        for (int i = 0; i < 32 && c0 + i <= pm; ++i) {
          const float e = __shfl_sync(kFull, eff, i);
          if (e > best * 1.03f) {
            best = e;
            Pn = c0 + i;
          }
          if (best >= 0.95f) {
            done = true;
            break;
          }
        }
      }
    }
  }
  const int64_t items = (int64_t)K * Pn;

  WarpMem wm;
  {
    unsigned char* w = smem + P.cum_bytes + (int64_t)warp * P.warp_bytes;
    wm.lst = reinterpret_cast<uint64_t*>(w);
    w += align16((int64_t)list_len(n) * 8);
    wm.stage = reinterpret_cast<float*>(w);
    w += kStageFloats * 4;
    wm.ev = reinterpret_cast<float*>(w);
    wm.epos = reinterpret_cast<int32_t*>(wm.ev + (n + 2));
    wm.srt = reinterpret_cast<float*>(wm.epos + (n + 2));
    wm.hist = reinterpret_cast<int32_t*>(wm.srt + (n + 2));
    wm.ecnt = wm.hist + (n + 2);
    wm.bat = V2 ? reinterpret_cast<uint64_t*>(smem + P.cum_bytes + (int64_t)warp * P.warp_bytes +
                                              warp_smem_bytes(n, COUNT))
                : nullptr;
  }

  for (int64_t w = (int64_t)blockIdx.x * nwarps + warp; w < items; w += TW) {
    const int q = (int)(w / Pn), p = (int)(w % Pn);
    int lo = 0, hi = R;
    while (hi - lo > 1) {
      const int mid = (lo + hi) >> 1;
      if (cum[mid] <= q) lo = mid;
      else hi = mid;
    }
    const int r = lo;
    const int j = q - cum[r];
    const int rb = max(P.row_offsets ? P.row_offsets[r] : r, 0);
    const int i = rb + j;
    const int slot = P.slots ? P.slots[r] : r;
    float Tm = P.temperatures ? P.temperatures[r] : P.temperature;
    if (isnan(Tm) || Tm < 0.f || isinf(Tm)) Tm = 1.f;
    if (Tm == 0.f) Tm = 1.f;
    float invT = 1.0f / Tm;
    if (isinf(invT)) invT = 1.f;
    const bool scaled = invT != 1.0f;
    int n_ids = 0;
    if (P.token_ids) {
      n_ids = P.num_token_ids ? P.num_token_ids[r] : n;
      n_ids = max(0, min(n_ids, n));
    }
    const bool topn = n_ids == 0 && n > 0;
    const int NTe = topn ? n : 1;
    const T* row = reinterpret_cast<const T*>(P.logits) + (int64_t)i * P.row_stride;

    for (int jj = lane; jj < NTe; jj += 32) wm.lst[jj] = 0;
    __syncwarp();
    uint64_t thr = 0;

    // Given entries (ranks by counting).
    int k = 0;
    float thr_lo = kInf, thr_hi = kInf;
    if (COUNT) {
      for (int e0 = 0; e0 <= n_ids; e0 += 32) {
        const int e = e0 + lane;
        bool valid = false;
        float val = 0.f;
        if (e <= n_ids) {
          int tok = -1;
          if (e == 0) tok = P.committed ? P.committed[i] : -1;
          else tok = P.token_ids[(int64_t)r * n + e - 1];
          valid = tok >= 0 && tok < V;
          if (valid) val = full_value(Elem<T>::one(row + tok), invT);
          wm.ev[e] = val;
          wm.epos[e] = valid ? 0 : -1;
        }
        k += __popc(__ballot_sync(kFull, valid));
      }
      __syncwarp();
      for (int e = lane; e <= n_ids; e += 32) {
        if (wm.epos[e] < 0) continue;
        const float ve = wm.ev[e];
        int pos = 0;
        for (int e2 = 0; e2 <= n_ids; ++e2) {
          if (wm.epos[e2] < 0) continue;
          const float v2 = wm.ev[e2];
          pos += (v2 < ve) || (v2 == ve && e2 < e);
        }
        wm.srt[pos] = ve;
        wm.ecnt[e] = pos;  // temporarily
      }
      for (int c = lane; c <= k; c += 32) wm.hist[c] = 0;
      __syncwarp();
      for (int e = lane; e <= n_ids; e += 32)
        if (wm.epos[e] >= 0) wm.epos[e] = wm.ecnt[e];
      if (k > 0) {
        thr_lo = wm.srt[0];
        thr_hi = wm.srt[k - 1];
      }
      __syncwarp();
    }

    // ---- the one pass over the chunk ----
    const int64_t t0 = (int64_t)p * tiles / Pn, t1 = (int64_t)(p + 1) * tiles / Pn;
    const bool aligned = (reinterpret_cast<uintptr_t>(row) & 15) == 0;
    // The list: one key per lane in a register while NTe <= 32, else in shared memory.
    const bool regl = NTe <= 32;
    uint64_t mykey_list = 0;
    int nl = 0;  // v2: keys in the list
    float M = -kInf;
    double Sl = 0.0;
    int chi = 0;
    float tv_bound = -kInf;  // value bound from lane maxima (list not full yet)
    auto insert = [&](uint64_t key) {
      if (regl) {
        const int pos = __popc(__ballot_sync(kFull, mykey_list > key));
        const uint64_t up = __shfl_up_sync(kFull, mykey_list, 1);
        if (lane == pos) mykey_list = key;
        else if (lane > pos) mykey_list = up;
        if (lane >= NTe) mykey_list = 0;
        thr = __shfl_sync(kFull, mykey_list, NTe - 1);
      } else {
        list_insert(wm.lst, NTe, key, &thr, lane);
      }
    };
    auto count_value = [&](float v) {
      if (COUNT && v > thr_lo) {
        if (v > thr_hi) ++chi;
        else {
          int a = 0, b = k;
          while (a < b) {
            const int m = (a + b) >> 1;
            if (wm.srt[m] < v) a = m + 1;
            else b = m;
          }
          atomicAdd(&wm.hist[a], 1);
        }
      }
    };
    auto process = [&](const Tile<T>& tl, int64_t base) {
      const float lm = tl.lane_max();
      const float tm = warp_max(lm);
      const bool full = scaled || tm == kInf;
      const float lmv = full ? full_value(lm, invT) : lm;
      const float tmv = full ? full_value(tm, invT) : tm;
      if (tmv > M) {
        if (M > -kInf) Sl *= exp((double)M - (double)tmv);
        M = tmv;
      }
      if (!(tmv > -kInf)) return;
      const float mM = M;
      constexpr float kL2E = 1.4426950408889634f;
      float s = 0.f;
      if (full) {
#pragma unroll
        for (int ii = 0; ii < 32; ++ii) {
          const float v = full_value(tl.get(ii), invT);
          s += ex2((v - mM) * kL2E);
          count_value(v);
        }
      } else {
#pragma unroll
        for (int ii = 0; ii < 32; ++ii) {
          const float v = fmaxf(tl.get(ii), -kInf);
          s += ex2((v - mM) * kL2E);
          count_value(v);
        }
      }
      Sl += (double)s;

      // top-NTe candidates: only tiles where some lane's maximum reaches the threshold
      float tv = thr ? fmaxf(key_value(thr), tv_bound) : tv_bound;
      if (V2 && regl) {
        // v2: each lane marks its own candidates (values >= tv) in a bit mask; then batches of
        // one candidate per lane (the lane's next one, re-checked against the risen threshold)
        // are merged into the list at once by counting (position = keys greater in the list +
        // keys greater in the batch), instead of a warp-wide insertion step per candidate.
        // The list after each batch is the top NTe of the keys seen (keys are distinct), so
        // the chunk's list is the same as v1's.
        bool cand = lmv > -kInf && lmv >= tv;
        const unsigned cl2 = __ballot_sync(kFull, cand);
        if (!cl2) return;
        if (thr == 0 && __popc(cl2) >= NTe) {
          // NTe-th largest lane maximum (at least NTe values of this tile reach it), by
          // counting: the least lane maximum with fewer than NTe lane maxima above it.
          float* lmx = wm.stage;
          lmx[lane] = lmv;
          __syncwarp();
          int gt = 0;
#pragma unroll
          for (int t = 0; t < 32; t += 4) {
            const float4 q4 = *reinterpret_cast<const float4*>(lmx + t);
            gt += (q4.x > lmv) + (q4.y > lmv) + (q4.z > lmv) + (q4.w > lmv);
          }
          __syncwarp();
          const float nth = warp_min(gt < NTe ? lmv : kInf);
          tv_bound = fmaxf(tv_bound, nth);
          tv = fmaxf(tv, tv_bound);
          cand = lmv > -kInf && lmv >= tv;
        }
        // the lane's candidates, values staged [ii][lane] (each lane reads back its own)
        unsigned mk = 0;
        if (cand) {
#pragma unroll
          for (int ii = 0; ii < 32; ++ii) {
            const float v = full ? full_value(tl.get(ii), invT) : fmaxf(tl.get(ii), -kInf);
            if (v > -kInf && v >= tv) {
              wm.stage[ii * 32 + lane] = v;
              mk |= 1u << ii;
            }
          }
        }
        uint64_t* bc = wm.bat;        // the batch's candidates, compacted
        uint64_t* bo = wm.bat + 32;   // the list before the batch
        uint64_t* bnw = wm.bat + 64;  // the list after it
        while (__ballot_sync(kFull, mk != 0)) {
          uint64_t ck = 0;
          bool valid = false;
          if (mk) {
            const int ii = __ffs(mk) - 1;
            mk &= mk - 1;
            const float v = wm.stage[ii * 32 + lane];
            if (v >= tv) {
              ck = make_key(v, (int32_t)(base + tile_elem<T>(ii, lane)));
              valid = ck > thr;
            }
          }
          const unsigned vb = __ballot_sync(kFull, valid);
          if (!vb) continue;
          const int nc = __popc(vb);
          if (nc <= 2) {
            // one or two: a warp-wide insertion each is shorter than a batch
            for (unsigned b2 = vb; b2; b2 &= b2 - 1) {
              const uint64_t key = __shfl_sync(kFull, ck, __ffs(b2) - 1);
              if (key > thr) {
                const int pos = __popc(__ballot_sync(kFull, mykey_list > key));
                const uint64_t up = __shfl_up_sync(kFull, mykey_list, 1);
                if (lane == pos) mykey_list = key;
                else if (lane > pos) mykey_list = up;
                if (lane >= NTe) mykey_list = 0;
                nl = min(NTe, nl + 1);
                thr = __shfl_sync(kFull, mykey_list, NTe - 1);
                if (thr) tv = fmaxf(tv, key_value(thr));
              }
            }
            continue;
          }
          if (valid) bc[__popc(vb & ((1u << lane) - 1u))] = ck;
          bo[lane] = mykey_list;
          __syncwarp();
          int gc = 0, gl = 0, lc = 0;  // batch keys > ck, batch keys > my list key, list > ck
          for (int t = 0; t < nc; ++t) {
            const uint64_t c = bc[t];
            gc += c > ck;
            gl += c > mykey_list;
          }
          for (int t = 0; t < nl; ++t) lc += bo[t] > ck;
          if (valid && lc + gc < NTe) bnw[lc + gc] = ck;
          if (lane < nl && lane + gl < NTe) bnw[lane + gl] = mykey_list;
          __syncwarp();
          nl = min(NTe, nl + nc);
          mykey_list = lane < nl ? bnw[lane] : 0ull;
          thr = nl == NTe ? bnw[NTe - 1] : 0ull;
          if (thr) tv = fmaxf(tv, key_value(thr));
          __syncwarp();
        }
        return;
      }
      unsigned cl = __ballot_sync(kFull, lmv > -kInf && lmv >= tv);
      if (!cl) return;
      if (thr == 0 && NTe <= 32 && __popc(cl) >= NTe) {
        // n-th largest lane maximum: at least NTe values of this tile reach it.
        float s2 = lmv;
#pragma unroll
        for (int kk = 2; kk <= 32; kk <<= 1) {
#pragma unroll
          for (int jj = kk >> 1; jj > 0; jj >>= 1) {
            const float o = __shfl_xor_sync(kFull, s2, jj);
            const bool keep_max = ((lane & kk) == 0) == ((lane & jj) == 0);
            s2 = keep_max ? fmaxf(s2, o) : fminf(s2, o);
          }
        }
        const float nth = __shfl_sync(kFull, s2, NTe - 1);
        tv_bound = fmaxf(tv_bound, nth);
        tv = fmaxf(tv, tv_bound);
        cl = __ballot_sync(kFull, lmv > -kInf && lmv >= tv);
      }
#pragma unroll
      for (int ii = 0; ii < 32; ++ii)
        wm.stage[ii * 33 + lane] = full ? full_value(tl.get(ii), invT) : fmaxf(tl.get(ii), -kInf);
      __syncwarp();
      while (cl) {
        const int src = __ffs(cl) - 1;
        cl &= cl - 1;
        const float v = wm.stage[lane * 33 + src];
        const int32_t idx = (int32_t)(base + tile_elem<T>(lane, src));
        const uint64_t mykey = make_key(v, idx);
        unsigned cb = __ballot_sync(kFull, v > -kInf && v >= tv);
        while (cb) {
          const int l2 = __ffs(cb) - 1;
          cb &= cb - 1;
          const uint64_t key = __shfl_sync(kFull, mykey, l2);
          if (key > thr) {
            insert(key);
            if (thr) tv = fmaxf(tv, key_value(thr));
          }
        }
      }
      __syncwarp();
    };
    {
      // full tiles [t0, tf) with vector loads, then the partial last tile / unaligned rows
      // guarded.
      int64_t tf = aligned ? (int64_t)(V / kTile) : t0;
      if (tf > t1) tf = t1;
      if (tf < t0) tf = t0;
      Tile<T> cur;
      if constexpr (V2 == 1 && sizeof(T) == 2) {
        // v2, 16-bit: a rolling pipeline of two tiles, tile t + 2's load issued as soon as tile
        // t is processed (v1 loads a pair and processes both before the next pair's loads), so
        // a load waits for one tile's processing less; one copy of process() in the loop (v1:
        // three), the same order of tiles. (f32: two tiles in registers spill under the
        // 128-register cap, so one tile at a time as v1.)
        Tile<T> nxt{};
        int64_t t = t0;
        if (t < tf) cur.load(row + t * kTile, lane);
        if (t + 1 < tf) nxt.load(row + (t + 1) * kTile, lane);
#pragma unroll 1
        for (; t < tf; ++t) {
          process(cur, t * kTile);
          cur = nxt;
          if (t + 2 < tf) nxt.load(row + (t + 2) * kTile, lane);
        }
      } else if constexpr (sizeof(T) == 2) {
        // two tiles' loads (4 KB per warp, as many bytes as one f32 tile) before processing
        Tile<T> nxt;
        int64_t t = t0;
        for (; t + 1 < tf; t += 2) {
          cur.load(row + t * kTile, lane);
          nxt.load(row + (t + 1) * kTile, lane);
          process(cur, t * kTile);
          process(nxt, (t + 1) * kTile);
        }
        if (t < tf) {
          cur.load(row + t * kTile, lane);
          process(cur, t * kTile);
        }
      } else {
        for (int64_t t = t0; t < tf; ++t) {
          cur.load(row + t * kTile, lane);
          process(cur, t * kTile);
        }
      }
      for (int64_t t = tf; t < t1; ++t) {
        cur.load_guarded(row + t * kTile, (int64_t)V - t * kTile, lane);
        process(cur, t * kTile);
      }
    }
    if (regl) {
      if (lane < NTe) wm.lst[lane] = mykey_list;
      __syncwarp();
    }
    double S = warp_sum(Sl);
    if (COUNT) {
      chi = warp_sum_int(chi);
      __syncwarp();
      if (lane == 0) {
        wm.hist[k] += chi;
        for (int c = k - 1; c >= 0; --c) wm.hist[c] += wm.hist[c + 1];
      }
      __syncwarp();
      for (int e = lane; e <= n_ids; e += 32)
        wm.ecnt[e] = wm.epos[e] >= 0 ? wm.hist[wm.epos[e] + 1] : 0;
      __syncwarp();
    }

    // ---- partials and the per-row merge ----
    if (Pn > 1) {
      unsigned char* pp = P.partials + ((int64_t)q * Pn + p) * P.partial_bytes;
      if (lane == 0) {
        *reinterpret_cast<double*>(pp) = S;
        *reinterpret_cast<float*>(pp + 8) = M;
      }
      uint64_t* pk = reinterpret_cast<uint64_t*>(pp + 16);
      for (int jj = lane; jj < NTe; jj += 32) pk[jj] = wm.lst[jj];
      int32_t* pc = reinterpret_cast<int32_t*>(pp + 16 + (int64_t)list_len(n) * 8);
      if (COUNT)
        for (int e = lane; e <= n_ids; e += 32) pc[e] = wm.ecnt[e];
      __threadfence();
      __syncwarp();
      int old = 0;
      if (lane == 0) old = atomicAdd(&P.counters[q], 1);
      old = __shfl_sync(kFull, old, 0);
      if (old != Pn - 1) continue;
      __threadfence();
      if (lane == 0) P.counters[q] = 0;
      const bool kway = NTe <= 32 && Pn <= 32 && Pn * NTe <= kStageKeys;
      if (V2 && kway) {
        // v2: every load first (the headers and the lists, one round trip), then the same
        // (M, S) arithmetic as below, lane p2 holding partial p2.
        uint64_t* st64 = reinterpret_cast<uint64_t*>(wm.stage);
        const bool other = lane < Pn && lane != p;
        float M2 = -kInf;
        double S2 = 0.0;
        if (other) {
          const unsigned char* op = P.partials + ((int64_t)q * Pn + lane) * P.partial_bytes;
          M2 = __ldcg(reinterpret_cast<const float*>(op + 8));
          S2 = __ldcg(reinterpret_cast<const double*>(op));
        }
        for (int t = lane; t < Pn * NTe; t += 32) {
          const int p2 = t / NTe, jx = t - p2 * NTe;
          uint64_t kk;
          if (p2 == p) kk = wm.lst[jx];
          else
            kk = __ldcg(reinterpret_cast<const uint64_t*>(
                            P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes + 16) + jx);
          st64[t] = kk;
        }
        const float Mall = warp_max(other ? fmaxf(M, M2) : M);
        double Sacc = 0.0;
        if (other && M2 > -kInf) Sacc += S2 * exp((double)M2 - (double)Mall);
        Sacc = warp_sum(Sacc);
        if (M > -kInf) Sacc += S * exp((double)M - (double)Mall);
        S = Sacc;
        M = Mall;
      } else {
        // (M, S): all partial headers in parallel, lane p2 holding partial p2.
        float Mall = M;
        for (int b0 = 0; b0 < Pn; b0 += 32) {
          const int p2 = b0 + lane;
          if (p2 < Pn && p2 != p) {
            const unsigned char* op = P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes;
            Mall = fmaxf(Mall, __ldcg(reinterpret_cast<const float*>(op + 8)));
          }
        }
        Mall = warp_max(Mall);
        double Sacc = 0.0;
        for (int b0 = 0; b0 < Pn; b0 += 32) {
          const int p2 = b0 + lane;
          if (p2 < Pn && p2 != p) {
            const unsigned char* op = P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes;
            const float M2 = __ldcg(reinterpret_cast<const float*>(op + 8));
            const double S2 = __ldcg(reinterpret_cast<const double*>(op));
            if (M2 > -kInf) Sacc += S2 * exp((double)M2 - (double)Mall);
          }
        }
        Sacc = warp_sum(Sacc);
        if (M > -kInf) Sacc += S * exp((double)M - (double)Mall);
        S = Sacc;
        M = Mall;
      }
      if (COUNT) {
        for (int e = lane; e <= n_ids; e += 32) {
          int acc = wm.ecnt[e];
#pragma unroll 4
          for (int p2 = 0; p2 < Pn; ++p2) {
            if (p2 == p) continue;
            const unsigned char* op = P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes;
            acc += __ldcg(reinterpret_cast<const int32_t*>(op + 16 + (int64_t)list_len(n) * 8) + e);
          }
          wm.ecnt[e] = acc;
        }
      }
      if (V2 && kway) {
        // v2: the merged list by rank. tau = the NTe-th largest key of a sample S (the first dS
        // keys of every list, one per lane), or where S holds fewer than NTe keys, the largest
        // last key of the lists: either way NTe keys are >= tau, so the top NTe are among the
        // keys >= tau (the candidates), and a candidate's rank among them is its rank in the
        // union (keys are distinct).
        uint64_t* st64 = reinterpret_cast<uint64_t*>(wm.stage);
        __syncwarp();
        const int dS = min(NTe, max(1, 32 / Pn)), nS = Pn * dS;
        const uint64_t xs = lane < nS ? st64[(lane / dS) * NTe + lane % dS] : 0ull;
        wm.bat[lane] = xs;
        __syncwarp();
        int rs = 0;
        for (int t = 0; t < nS; ++t) rs += wm.bat[t] > xs;
        uint64_t tau;
        if (__popc(__ballot_sync(kFull, xs != 0ull)) >= NTe) {
          const unsigned hb = __ballot_sync(kFull, xs != 0ull && rs == NTe - 1);
          tau = __shfl_sync(kFull, xs, __ffs(hb) - 1);
        } else {
          tau = warp_max_u64(lane < Pn ? st64[lane * NTe + NTe - 1] : 0ull);
        }
        int nc = 0;
        // compaction in place (a lane writes at or below the index it read, after the ballot)
        for (int t0 = 0; t0 < Pn * NTe; t0 += 32) {
          const int t = t0 + lane;
          const uint64_t x = t < Pn * NTe ? st64[t] : 0ull;
          const bool c = x != 0ull && x >= tau;
          const unsigned b = __ballot_sync(kFull, c);
          __syncwarp();  // (every lane's read of this round before any write: racecheck)
          if (c) st64[nc + __popc(b & ((1u << lane) - 1u))] = x;
          nc += __popc(b);
        }
        __syncwarp();
        for (int a0 = 0; a0 < nc; a0 += 32) {
          const int a = a0 + lane;
          const uint64_t x = a < nc ? st64[a] : 0ull;
          int rk = 0;
          for (int t = 0; t < nc; ++t) rk += st64[t] > x;
          if (a < nc && rk < NTe) wm.lst[rk] = x;
        }
        for (int e2 = nc + lane; e2 < NTe; e2 += 32) wm.lst[e2] = 0;
        __syncwarp();
      } else if (NTe <= 32 && Pn <= 32 && Pn * NTe <= kStageKeys) {
        // k-way merge: every list staged in shared memory, lane p2 holds the head of list p2,
        // NTe rounds of a warp-wide max (keys are distinct: they carry the token id).
        uint64_t* st64 = reinterpret_cast<uint64_t*>(wm.stage);
        for (int t = lane; t < Pn * NTe; t += 32) {
          const int p2 = t / NTe, jx = t - p2 * NTe;
          uint64_t kk;
          if (p2 == p) kk = wm.lst[jx];
          else
            kk = __ldcg(reinterpret_cast<const uint64_t*>(
                            P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes + 16) + jx);
          st64[t] = kk;
        }
        __syncwarp();
        int h = 0;
        int e = 0;
        for (; e < NTe; ++e) {
          const uint64_t hk = (lane < Pn && h < NTe) ? st64[lane * NTe + h] : 0ull;
          uint64_t m = hk;
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) {
            const uint64_t u = __shfl_xor_sync(kFull, m, o);
            m = u > m ? u : m;
          }
          if (m == 0) break;
          if (hk == m) ++h;
          if (lane == 0) wm.lst[e] = m;
        }
        for (int e2 = e + lane; e2 < NTe; e2 += 32) wm.lst[e2] = 0;
        __syncwarp();
      } else {
        // keys: sorted lists, merged by insertion above the running threshold; the next
        // partial's first chunk is loaded before the current one is processed.
        auto first_chunk = [&](int p2) -> uint64_t {
          if (p2 >= Pn || lane >= NTe) return 0ull;
          const unsigned char* op = P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes;
          return __ldcg(reinterpret_cast<const uint64_t*>(op + 16) + lane);
        };
        int p2 = (p == 0) ? 1 : 0;
        uint64_t next = first_chunk(p2);
        while (p2 < Pn) {
          int p3 = p2 + 1;
          if (p3 == p) ++p3;
          const uint64_t cur = next;
          next = first_chunk(p3);
          const uint64_t* ok = reinterpret_cast<const uint64_t*>(
              P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes + 16);
          for (int j0 = 0; j0 < NTe; j0 += 32) {
            const uint64_t kk = j0 == 0 ? cur : ((j0 + lane < NTe) ? __ldcg(ok + j0 + lane) : 0ull);
            unsigned b = __ballot_sync(kFull, kk > thr);
            if (!b) break;
            while (b) {
              const int l2 = __ffs(b) - 1;
              b &= b - 1;
              const uint64_t key = __shfl_sync(kFull, kk, l2);
              if (key > thr) list_insert(wm.lst, NTe, key, &thr, lane);
            }
          }
          p2 = p3;
        }
        __syncwarp();
      }
    }

    // ---- write the row ----
    const double logS = log(S);
    const double Md = (double)M;
    const bool lm_mode = P.logits_mode != 0;
    auto value_of = [&](float v) -> float {
      if (v == -kInf) return -kInf;
      return lm_mode ? v : (float)(((double)v - Md) - logS);
    };
    const int64_t obase = ((int64_t)slot * P.rows_per_slot + j) * E;
    auto put = [&](int e, int32_t tok, float val, int32_t rank) {
      if (P.out_tok) P.out_tok[obase + e] = tok;
      if (P.out_val) P.out_val[obase + e] = val;
      if (P.out_rank) P.out_rank[obase + e] = rank;
    };
    if (n_ids > 0 || P.committed) {
      // given entries
      for (int e = lane; e <= n_ids; e += 32) {
        if (e == 0 && !P.committed) continue;
        const int32_t tok = e == 0 ? P.committed[i] : P.token_ids[(int64_t)r * n + e - 1];
        if (COUNT && wm.epos[e] >= 0) put(e, tok, value_of(wm.ev[e]), 1 + wm.ecnt[e]);
        else put(e, tok, -kInf, 0);
      }
    }
    if (!P.committed && lane == 0) {
      const uint64_t k0 = wm.lst[0];
      if (k0) put(0, key_index(k0), value_of(key_value(k0)), 1);
      else put(0, 0, -kInf, 0);
    }
    if (topn) {
      int carry = 0;
      for (int j0 = 0; j0 < n; j0 += 32) {
        const int jj = j0 + lane;
        const uint64_t kk = jj < n ? wm.lst[jj] : 0ull;
        const float v = key_value(kk);
        const uint64_t kp = (jj > 0 && jj < n) ? wm.lst[jj - 1] : 0ull;
        int start = (jj == 0 || kp == 0 || key_value(kp) != v) ? jj : 0;
        start = max(start, carry);
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const int u = __shfl_up_sync(kFull, start, o);
          if (lane >= o) start = max(start, u);
        }
        carry = __shfl_sync(kFull, start, 31);
        if (jj < n) {
          if (kk) put(1 + jj, key_index(kk), value_of(v), 1 + start);
          else put(1 + jj, 0, -kInf, 0);
        }
      }
    } else if (n_ids > 0) {
      for (int e = n_ids + 1 + lane; e <= n; e += 32) put(e, 0, -kInf, 0);
    }
    __syncwarp();
  }
}


}  // namespace stash
}  // namespace dds

#endif  // DDS_KERNELS_STASH_CUH_
