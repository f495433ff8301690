// split_finish_kernel: the candidates' finish of filtered rows spread over several CTAs per row,
// for batches whose rows leave SMs idle (plan.split_finish). It replaces cand_finish_kernel (a
// warp per row) after row_pass_kernel and computes the same outputs bit for bit: the same
// candidate set S, the same thresholds, the same fixed-point sums, the same token, the same
// rows handed to filter_kernel.
//
// A row's CTAs each take kSplitBlocks consecutive blocks (a warp per block list):
//  1. every CTA copies the fields of the row's block records that steps 1 and 2 read to shared
//     memory (one read by the whole CTA, in place of warp 0's chain of loads) and derives from
//     them what finish_filtered derives (row maximum, U = the largest list bound, the top-k lower
//     bound lo, the min-p threshold) with the same functions (filtered.cuh filter_top, filter_lo)
//     run by its 8 warps (exact values: every CTA holds finish_filtered's);
//  2. it compacts its blocks' candidates with a > Ua and a >= lo into the row's S buffer (a
//     global counter per row: S is a set, its order is free) and sums the fixed-point mass of
//     the other candidates (top-p without top-k) with one 64-bit integer atomic per CTA;
//  3. the row's last CTA to finish (a counter per row, zeroed by the row pass) runs the rest of
//     finish_filtered on S with its 8 warps (CtaTeam): filter_thresholds, the kept sums in fixed
//     point, the block scores, list_token, the outputs; or appends the row to the fallback list.
//     Its S is copied to shared memory, in the place of step 1's records, when it holds at most
//     plan.split_smem entries (kSplitSmemS; every pass of the selects, the sums and the token
//     search then read it there, and the selects need no list of their own), and the blocks'
//     kept masses are summed in shared memory (mass_add: two 32-bit words a block), so this
//     step reads global memory once. On an S of at most
//     plan.split_rank entries in shared memory (at most kSplitRankMax), top-k's threshold comes
//     from the entries' ranks (rank_topk: four barriers in place of the radix select's passes and
//     its tie cut).
// Every step of 3 is order-free (radix selects on counts and integer masses, integer sums,
// exact argmaxes with ties by lower id) or is run by warp 0 in finish_filtered's lane order
// (the header, the mass outside the lists, the guided sums), hence the same bits.
#ifndef DDS_KERNELS_SAMPLE_SPLIT_ROW_CUH_
#define DDS_KERNELS_SAMPLE_SPLIT_ROW_CUH_

#include "filtered.cuh"

namespace dds {
namespace ksample {

// The row's block records' fields that steps 1 and 2 read.
struct SplitRecs {
  float rmaxl[kSplitMaxBlocks], rsecond[kSplitMaxBlocks], rea[kSplitMaxBlocks];
  int ramax[kSplitMaxBlocks], rpad[kSplitMaxBlocks];
};
static_assert(sizeof(int2) * kSplitSmemS <= sizeof(SplitRecs),
              "SplitSmem: S in the records' place");
struct SplitSmem {
  unsigned bins[kWBins * 3];  // 256 counts + 256 u64 masses; before the select: the lo keys
  union {
    SplitRecs r;           // steps 1 and 2
    int2 S[kSplitSmemS];   // step 3: the last CTA's copy of S (nS <= P.split_smem)
  } u;
  uint32_t kmlo[kSplitMaxBlocks], kmhi[kSplitMaxBlocks];  // kept masses per block (mass_add)
  TeamSmem team;
  unsigned lcnt;
  Top2 t;
  double zo;
  unsigned long long wz[3 * kRowWarps];  // cta_sum_u64 (one value, then three)
  double bv[kRowWarps];
  int bi[kRowWarps];
  double Zl, El;
  // rank_topk: S's keys (order key above the inverted column) and ranks, the k-th entry
  unsigned long long rv[kSplitRankMax];
  unsigned rr[kSplitRankMax];
  uint32_t rkey;
  int rcol;
};

// Top-k's threshold on a small S in shared memory (nS <= limit <= kSplitRankMax, k <= nS) by
// ranks, in place of the radix select's passes and its tie cut: entry j's rank in the order (a
// desc, t asc) is the number of entries before it, its 64-bit key (fkey(a) above ~t) below
// theirs, counted by the CTA's threads (256 / nS of them per entry, at least one, each over a
// share of S; the reads of one share are broadcasts). The entry of rank k - 1 gives kthr = its
// key and cid = its column, or INT_MAX when no entry of that key lies beyond it: the radix
// select's kthr and cid.
__device__ __forceinline__ bool rank_topk(SplitSmem& sm, int nS, int limit, int k, float invT,
                                          uint32_t& kthr, int& cid) {
  constexpr int kThreads = kRowWarps * 32;
  static_assert(kSplitRankMax <= kThreads, "rank_topk: at least one thread per entry of S");
  if (nS > limit || nS > kSplitRankMax || nS < 1) return false;
  const int tid = threadIdx.x;
  for (int j = tid; j < nS; j += kThreads) {
    const int2 e = sm.u.S[j];
    const float a = row::temper(__int_as_float(e.y), invT);
    sm.rv[j] = ((unsigned long long)fkey(a) << 32) | (unsigned long long)(~(uint32_t)e.x);
    sm.rr[j] = 0u;
  }
  __syncthreads();
  const int parts = kThreads / nS;
  if (tid < parts * nS) {
    const int j = tid % nS, part = tid / nS;
    const unsigned long long vj = sm.rv[j];
    unsigned n = 0;
    for (int i = part; i < nS; i += parts) n += sm.rv[i] > vj ? 1u : 0u;
    atomicAdd(&sm.rr[j], n);
  }
  __syncthreads();
  for (int j = tid; j < nS; j += kThreads)
    if (sm.rr[j] == (unsigned)(k - 1)) {
      sm.rkey = (uint32_t)(sm.rv[j] >> 32);
      sm.rcol = (int)~(uint32_t)sm.rv[j];
    }
  __syncthreads();
  const uint32_t K = sm.rkey;
  bool beyond = false;
  for (int j = tid; j < nS; j += kThreads) beyond |= (uint32_t)(sm.rv[j] >> 32) == K && sm.rr[j] >= (unsigned)k;
  beyond = __syncthreads_or(beyond) != 0;
  kthr = K;
  cid = beyond ? sm.rcol : INT_MAX;
  return true;
}

static_assert(sizeof(BlockRec) == 32 && offsetof(BlockRec, amax) == 8 && offsetof(BlockRec, ea) == 16 &&
                  offsetof(BlockRec, pad) == 28,
              "BlockRec: two 16-byte words as split_finish_kernel reads them");
static_assert(sizeof(SplitSmem) <= 48 * 1024, "SplitSmem: static shared memory");
// filter_top / filter_lo's view of the staged records.
struct RecsSmem {
  const SplitSmem* s;
  __device__ __forceinline__ float maxl(int b) const { return s->u.r.rmaxl[b]; }
  __device__ __forceinline__ float second(int b) const { return s->u.r.rsecond[b]; }
  __device__ __forceinline__ int amax(int b) const { return s->u.r.ramax[b]; }
  __device__ __forceinline__ float ea(int b) const { return s->u.r.rea[b]; }
};

// CTA `cta` of the split finish's grid (rows x split_ctas_for(nblocks) CTAs). The row's last
// CTA calls verdict() (the whole CTA) once it has said whether the row goes to the fallback list
// (and appended it there), before it finishes a row that settles, and already when
// filter_thresholds knows that the row settles (its top-p select's first pass: verdict() then
// runs twice).
template <int DT, class Verdict = NoCall>
__device__ __forceinline__ void split_finish_cta(const SampleParams& P, SplitSmem& sm,
                                                 unsigned cta, const Verdict& verdict = {}) {
  const int spr = split_ctas_for(P.nblocks);  // CTAs per row
  const int row = (int)(cta / (unsigned)spr);
  const int part = (int)(cta - (unsigned)row * (unsigned)spr);
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
  if (row >= P.num_rows) return;
  Req q = row_req(P, row);
  if (!is_filtered(q, P.V)) return;  // (the whole CTA: every CTA of the row)
  const int nb = P.nblocks;
  const int L = P.cand_cap;
  const float invT = q.invT;
  const BlockRec* recs = P.recs + (long long)row * nb;
  int2* cl = P.cand + (long long)row * nb * L;
  int2* S = P.split_s + (long long)row * nb * L;
  SplitRowCnt& rc = P.split_cnt[row];

  // 1. The records' fields (a BlockRec is two 16-byte words: maxl second amax sa, ea sl el pad).
  for (int b = tid; b < nb; b += kRowWarps * 32) {
    const uint4* r = reinterpret_cast<const uint4*>(recs + b);
    const uint4 x = __ldcg(r), y = __ldcg(r + 1);
    sm.u.r.rmaxl[b] = __uint_as_float(x.x);
    sm.u.r.rsecond[b] = __uint_as_float(x.y);
    sm.u.r.ramax[b] = (int)x.z;
    sm.u.r.rea[b] = __uint_as_float(y.x);
    sm.u.r.rpad[b] = (int)y.w;
  }
  __syncthreads();
  CtaTeam team;
  team.lane = lane;
  team.sm = &sm.team;
  Top2 t;
  float Ul;
  filter_top(team, P, RecsSmem{&sm}, t, Ul);
  if (t.m1 == neg_inf()) {  // no finite column: one CTA writes the empty row
    if (part == 0 && tid == 0) write_empty(P, row);
    return;
  }
  const float Ml = t.m1;
  const float m = row::temper(Ml, invT);
  const double md = (double)m;
  const FilterBounds fb = filter_lo(team, P, q, RecsSmem{&sm}, sm.bins, m, Ul);
  const float Ua = fb.Ua, lo = fb.lo, amin = fb.amin;
  const bool complete = fb.complete;
  const bool topk_on = q.k > 0 && q.k < P.V;
  const bool want_zout = q.p < 1.f && q.p > 0.f && !topk_on;

  // 2. This CTA's blocks: S entries out, the mass of the other candidates summed.
  unsigned long long zout = 0;
  const int b1 = min(nb, (part + 1) * kSplitBlocks);
  for (int b = part * kSplitBlocks + wid; b < b1; b += kRowWarps) {
    int n = sm.u.r.rpad[b];
    if (!want_zout && n > 0) {
      const float ma = row::temper(sm.u.r.rmaxl[b], invT);
      if (!(ma > Ua && ma >= lo)) n = 0;
    }
    for (int j0 = 0; j0 < n; j0 += 32) {
      const int j = j0 + lane;
      const bool valid = j < n;
      const int2 e = valid ? __ldcg(cl + (long long)b * L + j) : make_int2(0, 0);
      const float a = valid ? row::temper(__int_as_float(e.y), invT) : neg_inf();
      const bool in = valid && a > Ua && a >= lo;
      if (want_zout && valid && !in) zout += __double2ull_rn(exp((double)a - md) * kMassScale);
      const unsigned bal = __ballot_sync(0xffffffffu, in);
      if (bal == 0u) continue;
      unsigned base = 0;
      if (lane == 0) base = atomicAdd(&rc.ns, (unsigned)__popc(bal));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (in) S[base + __popc(bal & ((1u << lane) - 1u))] = e;
    }
  }
  {
    unsigned long long z[1] = {zout};
    cta_sum_u64(z, sm.wz);
    zout = z[0];
  }
  if (tid == 0 && zout) atomicAdd(&rc.zout, zout);
  if (!cta_count_done(&rc.done, (unsigned)spr)) return;

  // 3. The row's last CTA: finish_filtered's steps 3-6 on S, shared by the 8 warps.
  const int nS = (int)*reinterpret_cast<volatile unsigned*>(&rc.ns);
  zout = *reinterpret_cast<volatile unsigned long long*>(&rc.zout);
  const bool s_smem = nS <= min(P.split_smem, kSplitSmemS);
  if (s_smem)
    for (int j = tid; j < nS; j += kRowWarps * 32) sm.u.S[j] = __ldcg(S + j);
  for (int b = tid; b < nb; b += kRowWarps * 32) {
    sm.kmlo[b] = 0u;
    sm.kmhi[b] = 0u;
  }
  if (wid == 0) {
    if (!P.pass_top2) {  // the first column of the maximum and the runner-up: its block re-read
      const Top2 tb = block_top2<DT>(P, q, row, t.i1, t.m1, lane);
      t.i1 = tb.i1;
      t.m2 = fmaxf(t.m2, tb.m2);
    }
    // The mass outside S (top-p without top-k): the records' part in finish_filtered's order.
    const double zr = (q.p < 1.f && q.p > 0.f) ? outside_mass(recs, nb, lane, invT, md) : 0.0;
    double Zl = 0, El = 0;
    if (P.stats_guided) guided_sums(recs, nb, lane, Ml, Zl, El);
    if (lane == 0) {
      sm.t = t;
      sm.zo = zr * kMassScale + (double)zout;
      sm.Zl = Zl;
      sm.El = El;
    }
  }
  __syncthreads();
  t = sm.t;
  const double zo = sm.zo;
  const int2* Sv = s_smem ? sm.u.S : S;  // (global: read after the __threadfence() above)
  auto each = [&](auto g) {
    for_list<false>(Sv, nS, lane, [&](int c, float l) {
      const float a = row::temper(l, invT);
      g(c, a, fkey(a));
    }, 128 * wid + lane, 128 * kRowWarps);
  };
  unsigned* hist = sm.bins;
  unsigned long long* hm = reinterpret_cast<unsigned long long*>(sm.bins + kWBins);
  // (the row's lists are read by every CTA before its count: their area holds the select's list
  // when S is not in shared memory)
  const FiltThr th = filter_thresholds(team, P, q, each, nS, complete, m, md, amin, Ua, hist, hm,
                                       [&]() { return zo; }, s_smem ? nullptr : cl, &sm.lcnt,
                                       [&](int k, uint32_t& kthr, int& cid) {
                                         return s_smem && rank_topk(sm, nS, P.split_rank, k, invT, kthr, cid);
                                       },
                                       verdict);
  if (!th.ok || !th.inside) {  // not provable from the candidates: filter_kernel takes the row
    if (tid == 0) {
      const int slot = atomicAdd(P.fb_count, 1);
      P.fb_rows[slot] = row;
    }
    verdict();
    return;
  }
  verdict();
  const Kept in_k{th.kthr, th.cid, amin};
  // Kept sums in fixed point: per block (the block scores; zeroed above) and in all (cta_sum_u64's
  // barriers complete the block masses).
  const KeptSums ks = kept_list_sums<false>(
      Sv, nS, lane, in_k, invT, md,
      [&](int b, unsigned long long ux) { mass_add(sm.kmlo, sm.kmhi, (uint32_t)b, ux); }, 128 * wid + lane,
      128 * kRowWarps);
  unsigned long long sums[3] = {ks.zf, (unsigned long long)ks.ef, (unsigned long long)ks.nk};
  cta_sum_u64(sums, sm.wz);
  const unsigned long long zf = sums[0];
  const long long ef = (long long)sums[1];
  const int nk = (int)sums[2];
  // Winning block (float64 scores; ties by lower block), then the token.
  const uint32_t pos = (uint32_t)(P.positions ? __ldg(P.positions + row) : row - q.row_begin);
  double best;
  int bbest;
  best_block([&](int b) { return mass_at(sm.kmlo, sm.kmhi, b); }, nb, tid, kRowWarps * 32, md, q, pos, best,
             bbest);
  if (lane == 0) {
    sm.bv[wid] = best;
    sm.bi[wid] = bbest;
  }
  __syncthreads();
  best = 0;
  bbest = INT_MAX;
  for (int u = 0; u < kRowWarps; ++u) argmax_merge(best, bbest, sm.bv[u], sm.bi[u]);
  const int bt = list_token<false>(team, q, pos, Sv, nS, bbest, in_k, [&](float l) { return row::temper(l, invT); });
  const int token = (bt == INT_MAX) ? t.i1 : bt;
  if (tid == 0)
    filtered_outputs<DT>(P, q, row, token, t.i1, t.m2, Ml, m, th.kthr, th.cid, amin, zf, ef, nk,
                         sm.Zl, sm.El);
}

template <int DT>
__global__ void __launch_bounds__(kRowWarps * 32) split_finish_kernel(const __grid_constant__ SampleParams P) {
  __shared__ __align__(16) SplitSmem sm;
  split_finish_cta<DT>(P, sm, blockIdx.x);
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_SPLIT_ROW_CUH_
