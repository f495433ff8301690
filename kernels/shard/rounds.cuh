// Vocabulary-parallel kernels: rounds KEPT (kept_kernel: sums and sampler share over the filtered
// set) and RADIX (radix_kernel: a 256-bin histogram of one byte of the key, masses as 64-bit fixed
// point so that the record is deterministic), and slow_partial_kernel, every partial round with one
// thread per row (the host/device code as the CPU runs it) for slices of more than kMaxBlocks blocks.
#ifndef DDS_KERNELS_SHARD_ROUNDS_CUH_
#define DDS_KERNELS_SHARD_ROUNDS_CUH_

#include "block.cuh"

namespace dds {
namespace kshard {

// ------------------------------------------------------------------------------------------------
// Round KEPT.
template <int DT>
__global__ void __launch_bounds__(kThreads, kPassMinBlocks) kept_kernel(const __grid_constant__ Call c, unsigned char* out) {
  __shared__ PassSmem S;
  const int i = blockIdx.x;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  KeptRec& kr = *reinterpret_cast<KeptRec*>(out + c.row_bytes[c.kept_round] * i);
  if (threadIdx.x == 0) {
    setup_row(c, i, true, &S.r);
    S.r.g = shard::global_stats(c, S.r.w);
  }
  __syncthreads();
  cta_k_rule(c, &S.r, &S.u.merge, &S.misc[5]);
  if (threadIdx.x == 0) S.flag = S.r.k.filtered ? 1 : 0;
  __syncthreads();
  if (!S.flag) {
    if (threadIdx.x == 0) {
      memset(&kr, 0, sizeof kr);
      shard::clear_share(&kr.share, 0);
    }
    return;
  }
  if (S.r.k.radix && c.first_radix >= 0) {
    load_bins(c, S.r.w, shard::kRadixRounds, &S.u.bins);
    __syncthreads();
    if (threadIdx.x == 0) shard::k_rule_radix(c, S.r.w, S.r.g, S.u.bins, &S.r.k);
  }
  if (threadIdx.x == 0) set_min_p_threshold(&S.r.k);
  __syncthreads();
  cta_localize<DT>(c, &S.r, S.warp_cnt, &S.res, &S.misc[0], &S.keep);
  __syncthreads();
  const Geo gm = geo(c);
  for (int bi = wid; bi < gm.nblk; bi += kWarps)
    block_pass<DT, true>(c, S.r, gm.b_first + bi, lane, &S.u.recs[bi]);
  __syncthreads();
  const double M = S.r.k.M;
  if (wid == 0) {
    int cnt = 0;
    double z = 0, w = 0;
    for (int bi = lane; bi < gm.nblk; bi += 32) {
      const BlkRec& br = S.u.recs[bi];
      if (br.cnt == 0) continue;
      cnt += br.cnt;
      const double d = (double)br.m1 - M, f = exp(d);
      z += (double)br.sa * f;
      w += f * ((double)br.ea + d * (double)br.sa);
    }
    cnt = warp_sumi(cnt);
    z = warp_sumd(z);
    w = warp_sumd(w);
    if (lane == 0) {
      kr.count = cnt;
      kr.pad = 0;
      kr.z = z;
      kr.w = w;
    }
  }
  __syncthreads();
  make_share_cta<DT, true>(c, S, gm, S.r.k, M, &kr.share);
}

// ------------------------------------------------------------------------------------------------
// Rounds RADIX.
struct RadixSmem {
  RowCtx r;
  SmemBins bins;
  unsigned cnt[shard::kBins];
  unsigned long long mass[shard::kBins];
  int flag;
  uint32_t prefix;
};

template <int DT>
__global__ void __launch_bounds__(kThreads, 2) radix_kernel(const __grid_constant__ Call c, int32_t round,
                                                         unsigned char* out) {
  __shared__ RadixSmem S;
  const int i = blockIdx.x;
  RadixRec& rr = *reinterpret_cast<RadixRec*>(out + c.row_bytes[round] * i);
  const int d = round - c.first_radix;
  if (threadIdx.x == 0) {
    setup_row(c, i, true, &S.r);
    S.r.g = shard::global_stats(c, S.r.w);
    S.r.k = shard::k_rule_base_t<SmemMerge>(c, S.r.w, S.r.g, nullptr);  // only its kind
    S.flag = S.r.k.radix ? 1 : 0;
    S.prefix = 0;
  }
  for (int b = threadIdx.x; b < shard::kBins; b += blockDim.x) {
    S.cnt[b] = 0;
    S.mass[b] = 0ull;
  }
  __syncthreads();
  if (S.flag && d > 0) {
    load_bins(c, S.r.w, d, &S.bins);
    __syncthreads();
    if (threadIdx.x == 0) {
      const double target = (double)S.r.w.q.p * shard::radix_z1(S.bins);
      const RadixState s = shard::radix_walk(S.bins, target, d);
      if (s.keep_all) S.flag = 0;
      S.prefix = s.prefix;
    }
    __syncthreads();
  }
  if (S.flag) {
    const RowCtx& r = S.r;
    const double Ma = r.g.Ma;
    const int bits = 32 - __clz(c.Vs);
    const double scale = ldexp(1.0, 63 - bits);
    const int shift = 24 - 8 * d;
    const uint32_t prefix = S.prefix;
    for_cols<DT>(c, r, [&](int32_t, float l) {
      if (!(l > neg_inf())) return;
      const float x = xf(l, r.greedy, r.invT);
      const uint32_t key = shard::order_key(x);
      if (d > 0 && (key >> (shift + 8)) != prefix) return;
      const uint32_t bin = (key >> shift) & 255u;
      atomicAdd(&S.cnt[bin], 1u);
      atomicAdd(&S.mass[bin], __double2ull_rn(exp((double)x - Ma) * scale));
    });
    __syncthreads();
    const double inv = ldexp(1.0, bits - 63);
    for (int b = threadIdx.x; b < shard::kBins; b += blockDim.x) {
      rr.count[b] = S.cnt[b];
      rr.mass[b] = (double)S.mass[b] * inv;
    }
  } else {
    for (int b = threadIdx.x; b < shard::kBins; b += blockDim.x) {
      rr.count[b] = 0;
      rr.mass[b] = 0.0;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// First version (one thread per row, the CPU's per-row code): partial rounds of slices touching
// more than kMaxBlocks blocks.
__global__ void slow_partial_kernel(const __grid_constant__ Call c, int32_t round, int32_t kind,
                                    unsigned char* out) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c.a.num_rows) return;
  unsigned char* rowp = out + c.row_bytes[round] * i;
  if (kind == shard::kRoundStats) shard::partial_stats_row(c, i, rowp);
  else if (kind == shard::kRoundRadix) shard::partial_radix_row(c, round, i, rowp);
  else shard::partial_kept_row(c, i, rowp);
}

}  // namespace kshard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_ROUNDS_CUH_
