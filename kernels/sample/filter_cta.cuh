// filter_kernel: filtered rows, one 1024-thread CTA per row (the rows the candidate lists cannot
// settle): radix selects over the whole row held in shared memory or re-read.
#ifndef DDS_KERNELS_SAMPLE_FILTER_CTA_CUH_
#define DDS_KERNELS_SAMPLE_FILTER_CTA_CUH_

#include "filter_select.cuh"

namespace dds {
namespace ksample {

// The row's l values, read from the logits (RowSrc without the shared-memory row).
template <int DT>
__device__ __forceinline__ RowSrc<DT> filter_src(const SampleParams& P, const Req& q, int row) {
  using T = typename Elt<DT>::T;
  RowSrc<DT> src;
  src.crow = reinterpret_cast<const T*>(P.logits) + (long long)row * P.row_stride;
  src.urow = q.guided ? reinterpret_cast<const T*>(P.uncond) + (q.ufirst + (row - q.row_begin)) * P.uncond_stride
                      : nullptr;
  src.srow = nullptr;
  src.guided = q.guided;
  src.vec = P.vec_ok != 0;
  src.g = q.g;
  src.ban = ban_of(P, q);
  src.V = P.V;
  return src;
}
// The fallback rows that the split fallback (split_filter.cuh) starts: top-p without top-k on
// rows re-read from the logits, with processed statistics (sums in fixed point only).
__device__ __forceinline__ bool split_filter_ok(const SampleParams& P, const Req& q) {
  return P.split_filter && !P.direct_filter && !P.smem_row && !P.stats_guided && P.V > kSplitFiltMinV &&
         is_filtered(q, P.V) && (q.k <= 0 || q.k >= P.V) && q.p > 0.f && q.p < 1.f;
}

constexpr double kFix = 1099511627776.0;  // 2^40: filter_kernel's kept sums in fixed point
constexpr float kLog2e = 1.4426950408889634f;
// The fixed-point top-p mass of key kk (radix_select's mode-1 masses), md: the row's maximum a.
__device__ __forceinline__ unsigned long long topp_mass(uint32_t kk, double md) {
  return __double2ull_rn(exp((double)fkey_inv(kk) - md) * kMassScale);
}
// A kept column's terms of filter_kernel's fixed-point sums: returns exp(a - m) x 2^40, adds
// exp(a - m) (a - m) x 2^40 to ef.
__device__ __forceinline__ unsigned long long fix_terms(float a, float m, long long& ef) {
  const float d2 = fmaxf((a - m) * kLog2e, -1000.f);
  const float x = ex2(d2);
  ef += __double2ll_rn((double)(x * d2) * (0.6931471805599453 * kFix));
  return __double2ull_rn((double)x * kFix);
}
// The boundary pass of a wide top-p nucleus on one thread's VEC columns at base, once the first
// digit bd is known: of the columns inside (inside(c, l, &key)), those above bd that min-p keeps
// (a >= amin) add their terms (returned: the mass; ef, nk), those of digit bd go to list(e).
template <int VEC, class In, class L>
__device__ __forceinline__ unsigned long long boundary_terms(const float (&lv)[VEC], int base, uint32_t bd,
                                                             float amin, float m, const In& inside,
                                                             long long& ef, int& nk, const L& list) {
  unsigned long long cs = 0;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    uint32_t kk;
    if (!inside(base + e, lv[e], kk)) continue;
    const uint32_t dg = kk >> 21;
    if (dg > bd) {
      const float a = fkey_inv(kk);
      if (a >= amin) {
        cs += fix_terms(a, m, ef);
        ++nk;
      }
    } else if (dg == bd) {
      list(e);
    }
  }
  return cs;
}

template <int DT, bool MASK, bool SPLIT>
__device__ __forceinline__ void filter_row(const SampleParams& P, unsigned char* smem_raw, int row) {
  FilterSmem& sm = *reinterpret_cast<FilterSmem*>(smem_raw);
  float* srow = P.smem_row ? reinterpret_cast<float*>(smem_raw + sizeof(FilterSmem)) : nullptr;
  Req q = row_req<MASK>(P, row);
  if (!is_filtered(q, P.V)) return;
  constexpr int VEC = Elt<DT>::VEC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int V = P.V;
  const int i = row - q.row_begin;
  RowSrc<DT> src = filter_src<DT>(P, q, row);
  // The split fallback took the row (its first digit, the sums above it and its list are done).
  const SplitFiltRow* sfr =
      SPLIT && split_filter_ok(P, q) && __ldcg(&P.sf_rows[row].ok) != 0 ? P.sf_rows + row : nullptr;
  if (sfr && tid == 0) {
    // The first digit's state, as radix_select leaves it after its first pass (the top-p select
    // below resumes from it; nothing before it uses sm.sel_*): loaded while the row's maximum is
    // found, read after that step's barriers.
    const uint32_t d = __ldcg(&sfr->bd);
    sm.sel_key = d;
    sm.sel_eq_cnt = __ldcg(&sfr->eqn);
    sm.sel_above_cnt = __ldcg(&sfr->above_cnt);
    sm.sel_above_mass = __ldcg(&sfr->above_mass);
    sm.sel_target = __ldcg(&sfr->target);
    sm.sel_prefix = d << 21;
    sm.sel_pmask = 0x7ffu << 21;
  }

  // Pass 1: max / argmax / second of l, count of finite columns; fill the shared row. A row the
  // candidates' finish sent here (its block records intact) without top-k and not held in shared
  // memory skips it: the maximum, first argmax and runner-up come from the block records and the
  // maximum's block, as in that finish (n0, unknown, only bounds top-k and the short-row list:
  // V stands for it). Saves one of the three reads of a wide top-p nucleus.
  const bool recs_head = !P.direct_filter && !srow && (q.k <= 0 || q.k >= V);
  Top2 t{neg_inf(), INT_MAX, neg_inf()};
  int n0 = 0, n_tf = 0;
  Top2 rec{neg_inf(), INT_MAX, neg_inf()};  // recs_head: over the block records
  if (recs_head) {
    // A record per thread: one L2 round trip for up to 1024 blocks.
    const BlockRec* recs = P.recs + (long long)row * P.nblocks;
    for (int b = tid; b < P.nblocks; b += blockDim.x) {
      const float m1 = __ldcg(&recs[b].maxl);
      if (m1 == neg_inf()) continue;
      Top2 o{m1, P.pass_top2 ? __ldcg(&recs[b].amax) : b,
             P.pass_top2 ? __ldcg(&recs[b].second) : neg_inf()};
      rec = top2_merge(rec, o);
    }
    if (P.pass_top2) {
      t = rec;  // the records are the answer: the CTA's reduction below merges them
    } else {
      // Without top-2 records: the maximum's block (one column per thread) for its first column
      // and its runner-up, once the CTA knows which block that is.
      rec = warp_top2(rec);
      if (lane == 0) {
        sm.redf[warp] = rec.m1;
        sm.redi[warp] = rec.i1;
        sm.redf2[warp] = rec.m2;
      }
      __syncthreads();
      if (warp == 0) {
        rec = warp_top2(Top2{sm.redf[lane], sm.redi[lane], sm.redf2[lane]});
        if (lane == 0) {
          sm.resf[2] = rec.m1;
          sm.resi = rec.i1;
          sm.resf[1] = rec.m2;
        }
      }
      __syncthreads();
      rec = Top2{sm.resf[2], sm.resi, sm.resf[1]};
      // (warp 0 read sm.red* before the barrier above; sm.res* is written again only after the
      // barrier below)
      const int c = rec.i1 * kB + tid;
      if (rec.m1 != neg_inf() && tid < kB && c < V) {
        const float v = src.l(c);
        if (v != neg_inf()) t = Top2{v, c, neg_inf()};
      }
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
    if (recs_head) {  // (with top-2 records, w is already the records')
      if (!P.pass_top2) w = Top2{rec.m1, w.i1, fmaxf(rec.m2, w.m2)};
      n = w.m1 == neg_inf() ? 0 : V;  // (n0 unknown: V bounds it)
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
  const float m = row::temper(Ml, invT);
  const double md = (double)m;

  // Kept prefix (kthr, cid): key > kthr || (key == kthr && t <= cid). Initially every column.
  uint32_t kthr = 0;
  int cid = INT_MAX;

  // Candidates: when top-k is on, every kept column has a key >= the k-th largest per-thread
  // maximum (those are k distinct columns); when the row has few finite columns, all of them.
  // The list (in shared memory) then replaces the row for every selection pass and the sums.
  bool cand = false;
  if ((q.k > 0 && q.k < n0) || n0 <= kCandCap) {
    uint32_t tau = 0;
    if (q.k > 0 && q.k < n0 && q.k <= n_tf && n0 > kCandCap) {
      CandSrc ts{nullptr, sm.tmax, (int)blockDim.x};
      radix_select(sm, ts, 0, q.k, 0.0, [&](int c, float l, uint32_t& key) {
        if (l == neg_inf()) return false;
        key = fkey(row::temper(l, invT));
        return true;
      });
      tau = sm.sel_key;
    }
    if (tid == 0) sm.ncand = 0;
    __syncthreads();
    src.for_each([&](int c, float l) {
      const bool want = l != neg_inf() && fkey(row::temper(l, invT)) >= tau;
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
  // Kept sums per block, fixed point: the row's kmass (the candidates' finish writes it only for
  // the rows it settles; the split fallback's boundary pass writes there for this kernel).
  unsigned long long* const bsum = P.kmass + (long long)row * nb;
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
        const uint32_t kk = fkey(row::temper(l, invT));
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
        key = fkey(row::temper(l, invT));
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
        auto mass_of = [&](uint32_t kk) { return topp_mass(kk, md); };
        auto in_prefix = [&](int c, float l, uint32_t& key) {
          if (l == neg_inf()) return false;
          const uint32_t kk = fkey(row::temper(l, invT));
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
          // (sfr: the first digit's state is in sm.sel_* from the start of the row)
          if (!sfr) radix_select(sm, S, 1, 0, 0.0, in_prefix, mass_of, (double)q.p, 0, 1);
          const uint32_t bd = sm.sel_key;  // the boundary digit (key bits 31..21)
          const int eqn = sm.sel_eq_cnt;   // columns in it
          const long long upto = (long long)sm.sel_above_cnt + eqn;
          __syncthreads();
          if (upto <= kCandCap && !sfr) {
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
            csrc.n = min(sm.ncand, kCandCap);
          } else if (sfr) {
            // The split fallback's list of the digit's columns (global memory) and its sums of
            // the columns above the digit, as this kernel's boundary pass below leaves them.
            const int* lid = P.sf_list + (long long)row * 2 * kBigListCap;
            csrc = CandSrc{lid, reinterpret_cast<const float*>(lid + kBigListCap),
                           min((int)__ldcg(&sfr->nlist), kBigListCap)};
            if (tid == 0) {
              pre_zf = __ldcg(&sfr->zf);
              pre_ef = __ldcg(&sfr->ef);
              pre_nk = __ldcg(&sfr->nk);
            }
            listed = true;
            pre_sums = true;
          } else if (!P.stats_guided && eqn <= wide_list_cap(V)) {
            // A wide nucleus: one pass over the row adds the columns above the boundary digit
            // (all kept but for min-p) to the kept sums, per 1024-block in fixed point, and
            // lists the boundary digit's columns; the other digits, the tie cut and the rest of
            // the sums run on that list. 3 reads of the row instead of 5.
            int* lid = P.smem_row ? sm.cand_id : reinterpret_cast<int*>(smem_raw + sizeof(FilterSmem));
            float* ll = P.smem_row ? sm.cand_l : reinterpret_cast<float*>(lid + kBigListCap);
            const int lcap = P.smem_row ? kCandCap : kBigListCap;
            for (int b = tid; b < nb; b += blockDim.x) bsum[b] = 0ull;
            if (tid == 0) sm.ncand = 0;
            __syncthreads();
            constexpr int kCh = 32 * VEC;
            src.for_each_group((V + kCh - 1) / kCh * kCh, [&](int base, const float (&lv)[VEC]) {
              unsigned long long cs =
                  boundary_terms(lv, base, bd, amin, m, in_prefix, pre_ef, pre_nk, [&](int e) {
                    const int j = atomicAdd(&sm.ncand, 1);
                    if (j < lcap) {
                      lid[j] = base + e;
                      ll[j] = lv[e];
                    }
                  });
              cs = warp_sum_of(cs);
              if (lane == 0 && cs) {
                atomicAdd(&bsum[(base - lane * VEC) >> 10], cs);  // (the warp chunk's block)
                pre_zf += cs;
              }
            });
            __syncthreads();
            listed = true;
            pre_sums = true;
            csrc = CandSrc{lid, ll, min(sm.ncand, lcap)};
          } else {
            radix_select(sm, S, 1, 0, 0.0, in_prefix, mass_of, -1.0, 1, 3);
          }
          if (listed) {  // the other digits on the list
            cand = true;
            radix_select(sm, csrc, 1, 0, 0.0, in_prefix, mass_of, -1.0, 1, 3);
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
  unsigned long long zf = 0;  // cand_sums: this thread's kept sums in fixed point
  long long ef = 0;
  const bool cand_sums = cand && !P.stats_guided;
  if (cand_sums) {
    // Sums over the kept set from the candidate list, in 64-bit fixed point (order-independent),
    // added to those of the boundary pass (pre_sums: the columns above the list's digit).
    if (!pre_sums) {
      for (int b = tid; b < nb; b += blockDim.x) bsum[b] = 0ull;
      __syncthreads();
    }
    zf = pre_zf;
    ef = pre_ef;
    nk = pre_nk;
    for (int j = tid; j < csrc.n; j += blockDim.x) {
      const int c = csrc.id[j];
      const float a = row::temper(csrc.l[j], invT);
      if (!in_k(c, a)) continue;
      const unsigned long long ux = fix_terms(a, m, ef);
      atomicAdd(&bsum[c >> 10], ux);
      zf += ux;
      ++nk;
    }
  } else {
    src.for_each_group(nchunks * kChunk, [&](int base, const float (&lv)[VEC]) {
      float s = 0.f, en = 0.f, sl = 0.f, el = 0.f;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float l = lv[e];
        if (l == neg_inf()) continue;
        const float a = row::temper(l, invT);
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
    });
  }
  // The CTA's totals: the fixed-point sums as integers (the same whichever threads, or CTAs, added
  // the terms), the float64 ones in a fixed order; one shared-memory round for all of them.
  nk = warp_sumi(nk);
  if (cand_sums) {
    zf = warp_sum_of(zf);
    ef = (long long)warp_sum_of((unsigned long long)ef);
  } else {
    Z = warp_sumd(Z);
    E = warp_sumd(E);
  }
  Zl = warp_sumd(Zl);
  El = warp_sumd(El);
  // (the float64 sums pass through red64 as their bits)
  auto bits = [](double x) { return (unsigned long long)__double_as_longlong(x); };
  auto dbl = [](unsigned long long u) { return __longlong_as_double((long long)u); };
  if (lane == 0) {
    sm.red64[warp] = cand_sums ? zf : bits(Z);
    sm.red64[32 + warp] = cand_sums ? (unsigned long long)ef : bits(E);
    sm.red64[64 + warp] = bits(Zl);
    sm.red64[96 + warp] = bits(El);
    sm.cnt[warp] = (uint32_t)nk;
  }
  __syncthreads();
  if (warp == 0) {
    double z, e;
    if (cand_sums) {
      z = (double)warp_sum_of(sm.red64[lane]) / kFix;
      e = (double)(long long)warp_sum_of(sm.red64[32 + lane]) / kFix;
    } else {
      z = warp_sumd(dbl(sm.red64[lane]));
      e = warp_sumd(dbl(sm.red64[32 + lane]));
    }
    double zl = dbl(sm.red64[64 + lane]);
    double elv = dbl(sm.red64[96 + lane]);
    int n = (int)sm.cnt[lane];
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
      s = (float)((double)__ldcg(&bsum[b]) / kFix);
    } else {
      for (int sl = 0; sl < kSlots; ++sl)
        if (b * kSlots + sl < nchunks) s += part[b * 8 + sl];
    }
    if (!(s > 0.f)) continue;
    const double score = (md + log((double)s)) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
    argmax_merge(best, bbest, score, b);
  }
  const int wb = cta_argmax(sm, best, bbest);
  // Token within the block (team_token): thread tid walks column wb * 1024 + tid.
  const int c = wb * kB + tid;
  float lt_sel;  // the token's l, handed over by its thread
  const int token_sel = team_token(FilterTeam{&sm}, q, pos, [&](auto f, auto) {
    if (wb != INT_MAX && c < V && tid < kB) f(c, src.l(c));
  }, in_k, [&](float l) { return row::temper(l, invT); }, &lt_sel);
  if (tid == 0) {
    const int token = (token_sel == INT_MAX) ? amax : token_sel;
    RowInfo ri;
    ri.empty = 0;
    ri.token = token;
    ri.invT = invT;
    ri.kthr = kthr;
    ri.cid = cid;
    ri.amin = amin;
    const float lt = (token_sel == INT_MAX) ? src.l(token) : lt_sel;
    RowStats st;
    if (P.stats_guided) {
      st = row_stats(ri, 0, 0, Ml, log(Zl), Zl, El, lt, second_l != neg_inf(), second_l);
    } else {
      st = row_stats(ri, 2, 1, m, log(Z), Z, E, row::temper(lt, invT), nkept >= 2,
                     row::temper(second_l, invT));
    }
    write_row(P, row, token, amax, st, ri);
  }
}

// The rows that the row pass's finish could not prove from its candidates (the
// list fb_rows[0, fb_count), in any order), a grid-stride loop; the last CTA resets the list
// (graph-safe: zero at rest). Otherwise one CTA per row, every filtered row. MASK: as
// small_plain_kernel's. SPLIT: the launch follows the split fallback (plan.split_filter), whose
// rows resume from its state; without, that path is not compiled in (fewer registers live
// through the row's passes). With plan.split_overlap it may start before split_bound_kernel's
// grid has completed: it waits until that grid's CTAs have counted themselves done (P.ovl[1]),
// and its last CTA waits for that grid to complete (pdl_wait) before it exits.
template <int DT, bool MASK, bool SPLIT>
__global__ void __launch_bounds__(kFilterThreads) filter_kernel(SampleParams P) {
  DDS_DYNAMIC_SMEM(smem_raw);
  if (SPLIT && P.overlap) overlap_wait(P.ovl + 1, P.ovl_n[1]);
  if (!P.direct_filter) {
    const int n = min((int)*reinterpret_cast<volatile int*>(P.fb_count), P.num_rows);
    for (int i = blockIdx.x; i < n; i += gridDim.x) {
      const int row = __ldcg(P.fb_rows + i);
      if (row < 0 || row >= P.num_rows) continue;  // (uniform) never for a list of this call
      filter_row<DT, MASK, SPLIT>(P, smem_raw, row);
      __syncthreads();
    }
    if (cta_count_done(P.fb_done, gridDim.x) && threadIdx.x == 0) {
      *P.fb_count = 0;
      *P.fb_done = 0u;
      __threadfence();
      if (SPLIT && P.overlap) pdl_wait();
    }
  } else {
    filter_row<DT, MASK, SPLIT>(P, smem_raw, blockIdx.x);
  }
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_FILTER_CTA_CUH_
