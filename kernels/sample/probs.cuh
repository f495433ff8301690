// After the row kernels: probs_kernel (the probability rows) and status_kernel (request_status).
#ifndef DDS_KERNELS_SAMPLE_PROBS_CUH_
#define DDS_KERNELS_SAMPLE_PROBS_CUH_

#include "filter_cta.cuh"

namespace dds {
namespace ksample {

// ------------------------------------------------------------------------------------------------
// Probabilities (after the row kernels): one CTA of 256 threads per (row, 4096-column chunk).
template <int DT>
__global__ void __launch_bounds__(256) probs_kernel(const __grid_constant__ SampleParams P, int chunks) {
  constexpr int VEC = Elt<DT>::VEC;
  const long long bid = blockIdx.x;
  const int row = (int)(bid / chunks);
  const int chunk = (int)(bid - (long long)row * chunks);
  if (row >= P.num_rows) return;
  Req q = row_req(P, row);
  const RowInfo ri = P.rowinfo[row];
  using T = typename Elt<DT>::T;
  const int i = row - q.row_begin;
  const T* crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  const T* urow = q.guided ? reinterpret_cast<const T*>(P.uncond) + (q.ufirst + i) * P.uncond_stride : nullptr;
  const int odt = P.out.probs_dtype;
  const int osz = odt == 0 ? 4 : 2;
  char* orow = reinterpret_cast<char*>(P.out.probs) + (long long)row * P.out.probs_row_stride * osz;
  const bool ovec = ((uintptr_t)P.out.probs % 16 == 0) && ((P.out.probs_row_stride * osz) % 16 == 0);
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
      const row::Ban ban = ban_of(P, q);
      const uint32_t x = ban.group(c0, P.V);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float l = row::make_l(cv[e], q.guided ? uv[e] : 0.f, q.guided, q.g, x, e);
        float x = ri.use_a ? row::temper(l, ri.invT) : l;
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

// (static: every translation unit that includes this header and launches it has its own)
static __global__ void status_kernel(SampleParams P) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= P.num_requests) return;
  const Req q = load_req(P, r);
  int st = q.status;
  // Row i's DDS_REQ_EMPTY_ROW goes to request find(i) (common/offsets.h rows_of).
  int b, e;
  offsets::rows_of(P.row_offsets, P.num_requests, P.num_rows, r, &b, &e);
  for (int row = b; row < e; ++row)
    if (P.rowinfo[row].empty) {
      st |= kReqEmptyRow;
      break;
    }
  P.out.request_status[r] = st;
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_PROBS_CUH_
