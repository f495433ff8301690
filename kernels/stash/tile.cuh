// The stash kernel's per-warp building blocks: the value rule (sanitise, temperature), the
// order-preserving 64-bit keys of the top-n list, element loads, one lane's share of a 1024-token
// tile in registers (16-bit tiles kept packed), the warp's sorted key list in shared memory, and
// the per-warp shared-memory areas (WarpMem).
#ifndef DDS_KERNELS_STASH_TILE_CUH_
#define DDS_KERNELS_STASH_TILE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>

#include <type_traits>

#include "../common/device.cuh"
#include "../common/dtype.h"
#include "../common/request.h"
#include "../common/row.h"
#include "../common/warp.cuh"
#include "params.cuh"

namespace dds {
namespace stash {

constexpr float kInf = __builtin_huge_valf();
constexpr unsigned kFull = 0xffffffffu;

// NaN -> -inf, +inf -> FLT_MAX (row::sanitize), times invT, +inf -> FLT_MAX (exactly the CPU's
// order; a stash keeps a product that overflows to -inf at -inf).
__device__ __forceinline__ float full_value(float x, float invT) {
  return fminf(row::sanitize(x) * invT, FLT_MAX);
}
// (value desc, index asc): row::order_key (-0 == +0) above the inverted index.
__device__ __forceinline__ uint64_t make_key(float v, int32_t idx) {
  return ((uint64_t)row::order_key(v) << 32) | (uint64_t)(~(uint32_t)idx);
}
__device__ __forceinline__ float key_value(uint64_t k) { return row::key_value((uint32_t)(k >> 32)); }
__device__ __forceinline__ int32_t key_index(uint64_t k) { return (int32_t)(~(uint32_t)k); }

using kwarp::warp_incl_scan;

// The CUDA element type of dtype DT (the tile loads use the packed bf16x2 / half2 forms).
template <int DT>
struct StashType {
  using T = typename std::conditional<DT == kDtypeF32, float,
                                      typename std::conditional<DT == kDtypeBF16, __nv_bfloat16, __half>::type>::type;
};

// One element as fp32 (the given ids' values): the conversions of kernels/common/row.h (Elt).
template <typename T>
struct Elem {
  static constexpr int DT = std::is_same<T, float>::value            ? kDtypeF32
                            : std::is_same<T, __nv_bfloat16>::value ? kDtypeBF16
                                                                     : kDtypeF16;
  static constexpr int VEC = Elt<DT>::VEC;
  __device__ static float one(const T* p) {
    return Elt<DT>::cvt(__ldg(reinterpret_cast<const typename Elt<DT>::T*>(p)));
  }
};

// Element (within the tile) held by register i of lane `lane`.
template <typename T>
__device__ __forceinline__ int tile_elem(int i, int lane) {
  constexpr int VEC = Elem<T>::VEC;
  return ((i / VEC) * 32 + lane) * VEC + (i % VEC);
}

// One lane's share of one 1024-token tile in registers. f32: the values; 16-bit dtypes: the
// packed raw words (half the registers, so the next tile can be in flight while this one is
// processed), converted when used. get(i) is element tile_elem<T>(i, lane). exclude sets the
// columns of an allowed-token mask (row::Ban) to -inf in place, right after the load.
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
  // The columns that `ban` excludes (its mask; tile columns from `base`, V columns in the row) as
  // -inf: one mask word per 16-byte group.
  __device__ __forceinline__ void exclude(const row::Ban& ban, int64_t base, int32_t V, int lane) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t w = ban.word((int32_t)(base + (k * 32 + lane) * 4), V);
      float* v = reinterpret_cast<float*>(&f[k]);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (((w >> e) & 1u) == 0u) v[e] = -kInf;
    }
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
  __device__ __forceinline__ void exclude(const row::Ban& ban, int64_t base, int32_t V, int lane) {
    constexpr uint32_t kNegInf = std::is_same<T16, __nv_bfloat16>::value ? 0xff80u : 0xfc00u;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t m = ban.word((int32_t)(base + (k * 32 + lane) * 8), V);
      uint32_t* x = reinterpret_cast<uint32_t*>(&w[k]);
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        if (((m >> (2 * h)) & 1u) == 0u) x[h] = (x[h] & 0xffff0000u) | kNegInf;
        if (((m >> (2 * h + 1)) & 1u) == 0u) x[h] = (x[h] & 0xffffu) | (kNegInf << 16);
      }
    }
  }
  __device__ __forceinline__ float get(int i) const {
    const uint32_t x = word(i / 2);
    const uint16_t h = (uint16_t)((i & 1) ? (x >> 16) : (x & 0xffffu));
    if constexpr (std::is_same<T16, __nv_bfloat16>::value) return bf16_to_f32(h);
    else return __half2float(__ushort_as_half(h));
  }
  // packed max (NaN ignored unless both are NaN), then the two halves
  __device__ __forceinline__ float lane_max() const {
    using T162 = typename std::conditional<std::is_same<T16, __nv_bfloat16>::value, __nv_bfloat162,
                                           __half2>::type;
    T162 m = *reinterpret_cast<const T162*>(&w[0].x);
#pragma unroll
    for (int k = 1; k < 16; ++k) {
      const uint32_t x = word(k);
      m = __hmax2(m, *reinterpret_cast<const T162*>(&x));
    }
    return fmaxf(fmaxf(__low2float(m), __high2float(m)), -kInf);
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
};

}  // namespace stash
}  // namespace dds

#endif  // DDS_KERNELS_STASH_TILE_CUH_
