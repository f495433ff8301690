// stash_kernel: dds_stash_logprobs in one persistent launch (what it does: stash.cuh; why:
// docs/cuda_stash.md). Phases: (1) every CTA turns the keep flags into a prefix count of kept
// rows in shared memory (and writes the status of its share of the requests); (2) the chunk
// count per kept row, chosen from the kept-row count and the grid; (3) per (row, chunk) item one
// warp streams the chunk's tiles (max, sum, top-n list, given ids' counts); (4) with several
// chunks the last warp to arrive merges the partials; (5) the row's entries are written.
#ifndef DDS_KERNELS_STASH_KERNEL_CUH_
#define DDS_KERNELS_STASH_KERNEL_CUH_

#include "../common/offsets.h"
#include "tile.cuh"

namespace dds {
namespace stash {

// Register cap of the kernel: 2 CTAs of 256 threads per SM (<= 128 registers). Measured on the
// H200 against 3 CTAs (<= 80 registers, which spills with two 16-bit tiles in flight): 2 is as fast
// or faster in every stash scenario of dds_bench (bf16 4096 x 262144: 1.16x vs 1.36x the floor at
// n = 5; f32 4096 x 32000: 1.28x vs 1.46x), see bench/RESULTS.md.
constexpr int kMinBlocks = 2;

// Request r's rows to stash under the rules of stash.cuh: returns their count, sets *lo (the first
// of them) and *status (the request's bits but those of its given ids). owned: the row_offsets
// array is invalid, so the rows are those the request owns (common/offsets.h rows_of); else its
// whole range.
__device__ __forceinline__ int kept_rows(const Params& P, int r, bool owned, int* lo, int32_t* status) {
  const int R = P.num_requests;
  const int slot = P.slots ? P.slots[r] : r;
  const int rb = P.row_offsets ? P.row_offsets[r] : r;
  const int re = P.row_offsets ? P.row_offsets[r + 1] : r + 1;
  const int nvr = P.num_valid ? P.num_valid[r] : 0;
  const float Tm = P.temperatures ? P.temperatures[r] : P.temperature;
  // (Without row_offsets every request is its one row: the host checks num_rows == num_requests.)
  const bool rows_ok = P.row_offsets == nullptr || offsets::good(rb, re, r, R, P.num_rows);
  const bool slot_ok = slot >= 0 && slot < P.num_slots;
  if (!rows_ok || !slot_ok) {
    *status = (rows_ok ? 0 : kReqBadRowOffsets) | (slot_ok ? 0 : kReqBadSlot);
    return 0;
  }
  int l = rb, h = re;
  if (owned) offsets::rows_of(P.row_offsets, R, P.num_rows, r, &l, &h);
  const int nrows = re - rb;
  int nv = P.num_valid ? nvr : nrows;
  nv = max(0, min(nv, min(nrows, P.rows_per_slot)));
  *lo = l;
  *status = rule::temperature_bad(Tm) ? kReqBadTemperature : 0;
  return max(0, min(nv, h - rb) - (l - rb));
}

// The status bits of request r's given token ids: its num_token_ids / token_ids and the committed
// tokens of its stashed rows [lo, lo + cnt).
__device__ __forceinline__ int32_t given_ids_status(const Params& P, int r, int lo, int cnt) {
  int32_t status = 0;
  if (P.token_ids) {
    int nid = P.num_token_ids ? P.num_token_ids[r] : P.n;
    if (nid < 0 || nid > P.n) status |= kReqBadNumTokenIds;
    nid = max(0, min(nid, P.n));
    for (int e = 0; e < nid; ++e) {
      const int t = P.token_ids[(int64_t)r * P.n + e];
      if (t < 0 || t >= P.V) status |= kReqBadTokenId;
    }
  }
  if (P.committed)
    for (int i = lo; i < lo + cnt; ++i)
      if (P.committed[i] < 0 || P.committed[i] >= P.V) status |= kReqBadTokenId;
  return status;
}

// One launch for the whole call (see stash.cuh): T the logits' element type (float,
// __nv_bfloat16, __half); COUNT: given ids are ranked (committed tokens or the requests' own
// ids); MASK: the call has allowed-token masks (without, the mask pass is not compiled in: the
// kernel keeps the instructions of the kernel without masks). Registers are capped for
// kMinBlocks CTAs of 256 threads per SM.
template <typename T, bool COUNT, bool MASK>
__global__ void __launch_bounds__(256, kMinBlocks) stash_kernel(const Params P) {
  DDS_DYNAMIC_SMEM(smem);
  __shared__ int32_t scan_tmp[kMaxWarps];
  int32_t* cum = reinterpret_cast<int32_t*>(smem);
  const int R = P.num_requests;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nthreads = blockDim.x, nwarps = nthreads >> 5;

  // ---- 1. kept rows per request and their exclusive prefix in shared memory (cum[r]; K, the
  // total, in every thread); the status of request r is written by CTA r / per_cta ----
  const int per_cta = (R + (int)gridDim.x - 1) / (int)gridDim.x;
  const int my_r0 = (int)blockIdx.x * per_cta;
  const bool check_ids = P.req_status != nullptr && (P.token_ids != nullptr || P.committed != nullptr);
  // Whether the row_offsets array is valid (every request's offsets good, common/offsets.h: then
  // each request owns exactly its range, and neither this pass nor the items search for their
  // rows). Without the array no thread waits here (the host checks num_rows == num_requests).
  int bad_offsets = 0;
  if (P.row_offsets != nullptr) {
#pragma unroll 4
    for (int r = tid; r < R; r += nthreads)
      bad_offsets |= !offsets::good(P.row_offsets[r], P.row_offsets[r + 1], r, R, P.num_rows);
  }
  const bool offsets_valid = P.row_offsets == nullptr || __syncthreads_or(bad_offsets) == 0;
  // Request r's status, by the CTA whose share it is, where no given ids are checked (with them,
  // the loop at the end writes it with their bits).
  auto put_status = [&](int r, int32_t status) {
    if (P.req_status && !check_ids && r < R && (unsigned)(r - my_r0) < (unsigned)per_cta)
      P.req_status[r] = status;
  };
  if (!offsets_valid) {
    // An invalid array: the counts of the rows each request owns (searches), into cum.
#pragma unroll 1
    for (int r = tid; r < R; r += nthreads) {
      int cnt = 0, lo = 0;
      int32_t status = 0;
      if (P.keep == nullptr || P.keep[r] != 0) cnt = kept_rows(P, r, true, &lo, &status);
      put_status(r, status);
      cum[r] = cnt;
    }
    __syncthreads();
  }
  // The counts and their prefix in rounds of kReqPerLane * nthreads requests: warp w takes
  // 32 * kReqPerLane consecutive requests of a round, lane i the i-th of every 32 (coalesced loads,
  // conflict-free shared stores). A round's keep flags are all loaded before any other field of a
  // request (nothing else of a request not kept is read), so they cost one load latency, and its
  // kReqPerLane warp scans are independent of each other; then one barrier for the warps' totals.
  constexpr int kReqPerLane = 16;
  int carry = 0;  // the kept rows of the rounds before
  for (int base = 0; base < R; base += kReqPerLane * nthreads) {
    const int r0 = base + warp * (32 * kReqPerLane) + lane;
    int c[kReqPerLane];
    if (offsets_valid) {
      bool kept[kReqPerLane];
#pragma unroll
      for (int j = 0; j < kReqPerLane; ++j) {
        const int r = r0 + 32 * j;
        kept[j] = r < R && (P.keep == nullptr || P.keep[r] != 0);
      }
#pragma unroll
      for (int j = 0; j < kReqPerLane; ++j) {
        const int r = r0 + 32 * j;
        int lo = 0;
        int32_t status = 0;
        c[j] = kept[j] ? kept_rows(P, r, false, &lo, &status) : 0;
        put_status(r, status);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kReqPerLane; ++j) c[j] = r0 + 32 * j < R ? cum[r0 + 32 * j] : 0;
    }
    int ex[kReqPerLane], wsum = 0;  // exclusive prefix within the warp's share; its total
#pragma unroll
    for (int j = 0; j < kReqPerLane; ++j) ex[j] = warp_incl_scan(c[j], lane);
#pragma unroll
    for (int j = 0; j < kReqPerLane; ++j) {
      const int t = __shfl_sync(kFull, ex[j], 31);
      ex[j] += wsum - c[j];
      wsum += t;
    }
    if (base > 0) __syncthreads();  // (every warp has read the previous round's totals)
    if (lane == 0) scan_tmp[warp] = wsum;
    __syncthreads();
    int off = carry;
    for (int w2 = 0; w2 < nwarps; ++w2) {
      const int v = scan_tmp[w2];
      off += w2 < warp ? v : 0;
      carry += v;
    }
#pragma unroll
    for (int j = 0; j < kReqPerLane; ++j)
      if (r0 + 32 * j < R) cum[r0 + 32 * j] = off + ex[j];
  }
  if (check_ids) {
    // The statuses of this CTA's share with the given ids' bits (a loop of its own: the searches
    // inside the unrolled one would multiply the kernel's code).
#pragma unroll 1
    for (int r = my_r0 + tid; r < min(R, my_r0 + per_cta); r += nthreads) {
      int cnt = 0, lo = 0;
      int32_t status = 0;
      if (P.keep == nullptr || P.keep[r] != 0) {
        cnt = kept_rows(P, r, !offsets_valid, &lo, &status);
        if ((status & (kReqBadRowOffsets | kReqBadSlot)) == 0) status |= given_ids_status(P, r, lo, cnt);
      }
      P.req_status[r] = status;
    }
  }
  __syncthreads();
  const int K = carry;
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
    // Item q - cum[r] of request r is its owned row own_lo + (q - cum[r]), slot row j = i - rb.
    const int rb = P.row_offsets ? P.row_offsets[r] : r;
    int own_lo = rb, own_hi;
    if (!offsets_valid) offsets::rows_of(P.row_offsets, R, P.num_rows, r, &own_lo, &own_hi);
    const int i = own_lo + (q - cum[r]);
    const int j = i - rb;
    const int slot = P.slots ? P.slots[r] : r;
    int32_t tstatus = 0;  // (flagged by the counting pass)
    const rule::Tempering tt = rule::temperature(P.temperatures ? P.temperatures[r] : P.temperature, &tstatus);
    const float invT = tt.greedy ? 1.f : tt.invT;  // a stash of T = 0 keeps the untempered values
    const bool scaled = invT != 1.0f;
    int n_ids = 0;
    if (P.token_ids) {
      n_ids = P.num_token_ids ? P.num_token_ids[r] : n;
      n_ids = max(0, min(n_ids, n));
    }
    const bool topn = n_ids == 0 && n > 0;
    const int NTe = topn ? n : 1;
    const T* row = reinterpret_cast<const T*>(P.logits) + (int64_t)i * P.row_stride;
    // The request's allowed-token mask (no banned token in a stash): disallowed columns -inf.
    const row::Ban ban{-1, MASK ? allowed_row(P.allowed, P.allowed_stride, r) : nullptr};

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
          if (valid) val = ban.excluded(tok) ? -kInf : full_value(Elem<T>::one(row + tok), invT);
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
      const float tm = kwarp::warp_max(lm);
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
      if constexpr (sizeof(T) == 2) {
        // two tiles' loads (4 KB per warp, as many bytes as one f32 tile) before processing
        Tile<T> nxt;
        int64_t t = t0;
        for (; t + 1 < tf; t += 2) {
          cur.load(row + t * kTile, lane);
          nxt.load(row + (t + 1) * kTile, lane);
          if (MASK && ban.mask) {
            cur.exclude(ban, t * kTile, V, lane);
            nxt.exclude(ban, (t + 1) * kTile, V, lane);
          }
          process(cur, t * kTile);
          process(nxt, (t + 1) * kTile);
        }
        if (t < tf) {
          cur.load(row + t * kTile, lane);
          if (MASK && ban.mask) cur.exclude(ban, t * kTile, V, lane);
          process(cur, t * kTile);
        }
      } else {
        for (int64_t t = t0; t < tf; ++t) {
          cur.load(row + t * kTile, lane);
          if (MASK && ban.mask) cur.exclude(ban, t * kTile, V, lane);
          process(cur, t * kTile);
        }
      }
      for (int64_t t = tf; t < t1; ++t) {
        cur.load_guarded(row + t * kTile, (int64_t)V - t * kTile, lane);
        if (MASK && ban.mask) cur.exclude(ban, t * kTile, V, lane);
        process(cur, t * kTile);
      }
    }
    if (regl) {
      if (lane < NTe) wm.lst[lane] = mykey_list;
      __syncwarp();
    }
    double S = kwarp::warp_sumd(Sl);
    if (COUNT) {
      chi = kwarp::warp_sumi(chi);
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
      if (!warp_count_done(&P.counters[q], Pn)) continue;
      if (lane == 0) P.counters[q] = 0;
      // (M, S): all partial headers in parallel, lane p2 holding partial p2.
      float Mall = M;
      for (int b0 = 0; b0 < Pn; b0 += 32) {
        const int p2 = b0 + lane;
        if (p2 < Pn && p2 != p) {
          const unsigned char* op = P.partials + ((int64_t)q * Pn + p2) * P.partial_bytes;
          Mall = fmaxf(Mall, __ldcg(reinterpret_cast<const float*>(op + 8)));
        }
      }
      Mall = kwarp::warp_max(Mall);
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
      Sacc = kwarp::warp_sumd(Sacc);
      if (M > -kInf) Sacc += S * exp((double)M - (double)Mall);
      S = Sacc;
      M = Mall;
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
      if (NTe <= 32 && Pn <= 32 && Pn * NTe <= kStageKeys) {
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

#endif  // DDS_KERNELS_STASH_KERNEL_CUH_
