// The streaming pass of unfiltered rows: block_sums (a block record from 32 values per lane) and
// plain_pass_kernel (a warp per run of consecutive blocks; optionally finishing the row).
#ifndef DDS_KERNELS_SAMPLE_PLAIN_PASS_CUH_
#define DDS_KERNELS_SAMPLE_PLAIN_PASS_CUH_

#include "plain_finish.cuh"

namespace dds {
namespace ksample {


// A block's record from its maximum M (finite or -inf) and its 32 values per lane, get(e) = the
// lane's e-th value (l after docs §2). The same arithmetic for every source of values.
// N: values per lane (32; fewer for small_plain_kernel's short last block, whose other values
// would all be -inf: their terms are exact zeros, so the sums are the same bits).
template <int N = 32, class G>
__device__ __forceinline__ BlockRec block_sums(const SampleParams& P, const Req& q, float M, const G& get) {
  BlockRec rec = block_rec(M);
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  if (M != neg_inf()) {
    const bool want_e = P.want_stats && !P.stats_guided;
    if (!q.greedy && q.invT == 1.f) {
      // a == l: one exp pass serves sampling and both statistics modes.
      float s = 0.f, en = 0.f;
      if (want_e || P.stats_guided) {
        exp_terms<N>(get, M, s, en);
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
        const float ma = row::temper(M, q.invT);
        const float invT = q.invT;
        float s = 0.f, en = 0.f;
        if (want_e) {
          exp_terms<N>([&](int e) { return row::temper(get(e), invT); }, ma, s, en);
          rec.ea = warp_sum(en) * kLn2;
        } else {
#pragma unroll
          for (int e = 0; e < N; ++e) s += ex2((row::temper(get(e), invT) - ma) * kLog2e);
        }
        rec.sa = warp_sum(s);
      }
      if (P.want_stats && P.stats_guided) {
        float s = 0.f, en = 0.f;
        exp_terms<N>(get, M, s, en);
        rec.sl = warp_sum(s);
        rec.el = warp_sum(en) * kLn2;
      }
    }
  }
  return rec;
}

// FUSED: the row's last warp also finishes it (P.fuse_finish; 64 registers so that 32 warps
// per SM stay resident while the finishes run: 4096 x 1025 is one wave).
// MASK: the launch has allowed-token masks (P.allowed): every block takes load_block_l, whose
// ban_block tests each column against the request's mask words; without, the request's mask is
// a null constant and the code is that of a launch without masks.
template <int DT, bool FUSED, bool MASK>
__global__ void __launch_bounds__(kRowWarps * 32, FUSED ? 4 : 3) plain_pass_kernel(const __grid_constant__ SampleParams P) {
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
  Req q = row_req<MASK>(P, row);
  if (is_filtered(q, P.V)) return;
  const int b0 = wi * P.bpw, b1 = min(b0 + P.bpw, P.nblocks);
  // Unguided 16-byte-aligned rows: the next block's first PFN loads are in flight while this
  // block's arithmetic runs (a warp's blocks are consecutive blocks of one row).
  const bool fastrow = !MASK && P.vec_ok != 0 && !q.guided;
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
    const int bo = P.banned - blk * kB;  // (ban_block, split around the packed maxima)
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
    // (row::sanitize in place is exactly what load_block_l<DT, true> would have produced)
    M = warp_block_max(lv);
    rec = block_sums(P, q, M, [&](int e) { return lv[e]; });
  }
  if (lane == 0) P.recs[(long long)row * P.nblocks + blk] = rec;
  }  // blocks of this warp
  if constexpr (!FUSED) return;
  // The last warp of the row to finish its blocks finishes the row (its finish overlaps the
  // other rows' streaming instead of waiting for a second launch): it reads every record (__ldcg,
  // L2) after the row's count (warp_count_done).
  if (wpr > 1) {
    if (!warp_count_done(&P.counters[row], wpr)) return;
  } else {
    __syncwarp();
  }
  finish_plain_warp<DT>(P, q, row, lane);
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_PLAIN_PASS_CUH_
