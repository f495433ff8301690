// Vocabulary-parallel sampling, host and device: float64 helpers, the per-request parameters (the
// rules of kernels/common/request.h), a call's arguments (Args, Call), a row's columns (column: docs/sampling.md §2 by kernels/common/row.h), the
// rule of the set of columns a rank works on (KRule), a rank's share of the two-level sampler, and
// round 0 (STATS) of one row.
#ifndef DDS_KERNELS_SHARD_ROW_H_
#define DDS_KERNELS_SHARD_ROW_H_

#include "../common/offsets.h"
#include "../common/outputs.h"
#include "../common/request.h"
#include "../common/row.h"
#include "records.h"

namespace dds {
namespace shard {

// ---------------------------------------------------------------------------------------------
// float64 helpers (libm on both sides); the fp32 steps and the element access: kernels/common/row.h.
// ---------------------------------------------------------------------------------------------
DDS_HD double neg_inf_d() {
  const uint64_t b = 0xfff0000000000000ull;
  double d;
  memcpy(&d, &b, 8);
  return d;
}
// (::exp and ::log: libm's on the host, CUDA's in device code)
DDS_HD double dexp(double x) { return ::exp(x); }
DDS_HD double dlog(double x) { return ::log(x); }
// Order-preserving key of a and its inverse (kernels/common/row.h: -0 and +0 share +0's key).
using row::key_value;
using row::order_key;
// (value desc, id asc)
DDS_HD bool before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}
DDS_HD bool win_before(const Winner& x, const Winner& y) {  // x beats y
  if (x.id < 0) return false;
  if (y.id < 0) return true;
  return x.key > y.key || (x.key == y.key && x.id < y.id);
}

// ---------------------------------------------------------------------------------------------
// Per-request parameters (docs/sampling.md §1), per-row context, per-column values (§2).
// ---------------------------------------------------------------------------------------------
// The arguments of a call as the shard code reads them: dds_sample_args's fields (every one but
// struct_size, in the same order; guidance_scales .. step as one rule::Values), translated by
// src/shard_params.h.
struct Args {
  int32_t num_rows;
  int32_t num_requests;
  const int32_t* row_offsets;
  const int32_t* positions;
  const void* logits;
  int32_t dtype;  // kF32, kBF16, kF16
  int64_t row_stride;
  const void* uncond_logits;
  int64_t uncond_row_stride;
  int32_t uncond_num_rows;
  const int32_t* uncond_row_offsets;
  rule::Values vals;  // guidance_scales .. step (kernels/common/request.h)
  int32_t banned_token;
  int32_t stats;  // 0 processed, kStatsGuided
  RowOutputs out;  // tokens .. request_status (kernels/common/outputs.h)
};

using Params = rule::Request;  // a request's values (kernels/common/request.h)

DDS_HD void request_rows(const Args& a, int32_t r, int32_t* b, int32_t* e) {
  *b = a.row_offsets ? a.row_offsets[r] : r;
  *e = a.row_offsets ? a.row_offsets[r + 1] : r + 1;
}

DDS_HD Params request_params(const Args& a, int32_t r) {
  int32_t rb, re;
  request_rows(a, r, &rb, &re);
  // The row_offsets rule (common/offsets.h): flagged offsets own no rows, are never guided.
  const bool rows_ok = offsets::good(rb, re, r, a.num_requests, a.num_rows);
  return rule::request(a.vals, r, rb, re - rb, rows_ok, a.uncond_logits != nullptr,
                       a.uncond_row_offsets, a.uncond_num_rows, rows_ok ? 0 : kReqBadRowOffsets);
}

// Request of row i (last r with row_offsets[r] <= i, skipping empty requests; common/offsets.h).
DDS_HD int32_t row_request(const Args& a, int32_t i) {
  return offsets::find(a.row_offsets, a.num_requests, i);
}

// Everything a row needs: the arguments (normalised: strides resolved), the shard, the plan.
struct Call {
  const unsigned char* gathered;  // the all-gathered records of the earlier rounds
  Args a;
  int32_t V;          // full vocabulary
  int32_t off, Vs;    // this rank's slice
  int32_t rank, R;
  int32_t C;          // candidates per rank and row in round 0
  int32_t first_radix, kept_round;
  int64_t row_bytes[kMaxRounds];
  int64_t record_bytes[kMaxRounds];
  int64_t offset[kMaxRounds];
};

struct Row {
  int32_t i, j, req;
  uint32_t pos;
  Params q;
  int32_t order[kMaxWorld];  // ranks in offset order
  int32_t nranks;            // ranks found in order (R when the slices partition [0, V))
};

DDS_HD const unsigned char* rec(const Call& c, int32_t round, int32_t rank, int32_t row) {
  return c.gathered + c.offset[round] + c.record_bytes[round] * rank + c.row_bytes[round] * row;
}
DDS_HD const StatsHead& stats_of(const Call& c, int32_t rank, int32_t row) {
  return *reinterpret_cast<const StatsHead*>(rec(c, 0, rank, row));
}
DDS_HD const Cand* cands_of(const Call& c, int32_t rank, int32_t row) {
  return reinterpret_cast<const Cand*>(rec(c, 0, rank, row) + sizeof(StatsHead));
}

// The request's parameters with the top-k cap of the call: a k above max_top_k (and below V) is
// refused on the host where the arrays are host-readable (CPU); on the device it is taken as
// max_top_k and flagged kReqBadTopK.
DDS_HD Params call_params(const Call& c, int32_t r) {
  Params q = request_params(c.a, r);
  if (q.k > c.C && q.k < c.V) {
    q.k = c.C;
    q.status |= kReqBadTopK;
  }
  return q;
}

// with_order: compute the rank order from the gathered round-0 headers (rounds >= 1, finish).
DDS_HD void make_row(const Call& c, int32_t i, bool with_order, Row* w) {
  w->i = i;
  w->req = row_request(c.a, i);
  int32_t rb, re;
  request_rows(c.a, w->req, &rb, &re);
  // An orphan row (its request's offsets flagged) is keyed by its index in the call.
  w->j = offsets::good(rb, re, w->req, c.a.num_requests, c.a.num_rows) ? i - rb : i;
  w->pos = (uint32_t)(c.a.positions ? c.a.positions[i] : w->j);
  w->q = call_params(c, w->req);
  w->nranks = 0;
  if (!with_order) return;
  int64_t cursor = 0;
  while (cursor < c.V && w->nranks < c.R && w->nranks < kMaxWorld) {
    int32_t found = -1;
    for (int32_t r = 0; r < c.R; ++r)
      if (stats_of(c, r, 0).vocab_offset == cursor && stats_of(c, r, 0).vocab_slice > 0) {
        found = r;
        break;
      }
    if (found < 0) break;
    w->order[w->nranks++] = found;
    cursor += stats_of(c, found, 0).vocab_slice;
  }
}

struct Col {
  float l, x;
  bool in0;
};

// Column t (local index) of row w of this rank's slice: l, x (= a; = l for greedy rows), K0.
// The columns of the call that make_l sets to -inf (kernels/common/row.h Ban).
DDS_HD row::Ban ban_of(const Args& a) { return row::Ban{a.banned_token}; }

// a (x) from l: greedy rows use l itself.
DDS_HD float xf(float l, bool greedy, float invT) { return greedy ? l : row::temper(l, invT); }

DDS_HD Col column(const Call& c, const Row& w, int32_t t) {
  const Args& a = c.a;
  const Params& q = w.q;
  const float cv = load_elt(a.logits, a.dtype, (int64_t)w.i * a.row_stride + t);
  const float u = q.guided ? load_elt(a.uncond_logits, a.dtype, (q.uncond_first + w.j) * a.uncond_row_stride + t) : 0.f;
  const float v = row::make_l(cv, u, q.guided, q.g, c.off + t, ban_of(a));
  Col o;
  o.l = v;
  o.in0 = v > neg_inf();
  const float xv = xf(v, q.greedy, q.invT);
  o.x = xv;
  return o;
}

// The set of a row's columns a rank works on: K0 (round 0, unfiltered), or the filtered set K as
// a rule every rank applies to its own columns. Stateless, so any column can be tested alone.
struct KRule {
  bool filtered;   // non-greedy and some filter active: the KEPT round describes K
  bool cand;       // top-k (and top-p) decided on the candidates of round 0
  bool radix;      // top-p decided by the radix rounds
  bool has_thr;    // keep key > vkey, and key == vkey iff id <= id_thr
  uint32_t vkey;
  int32_t id_thr;  // candidate path: global; radix path: this rank's (after localize())
  int64_t tie_keep;  // radix path: global count of kept ties at vkey (first by id)
  bool use_min_p;
  double min_p;
  double M;        // global max of a
  bool use_xmin;   // CUDA: min-p as the equivalent fp32 threshold x >= xmin (set by the device
  float xmin;      // code from the same exp; the CPU never sets it)
};

DDS_HD KRule rule_k0() {
  KRule k;
  memset(&k, 0, sizeof k);
  return k;
}

DDS_HD bool in_rule(const KRule& k, const Col& col, int32_t id) {
  if (!col.in0) return false;
  if (k.has_thr) {
    const uint32_t key = order_key(col.x);
    if (key < k.vkey || (key == k.vkey && id > k.id_thr)) return false;
  }
  if (k.use_min_p) {
    if (k.use_xmin) {
      if (!(col.x >= k.xmin)) return false;
    } else if (!(dexp((double)col.x - k.M) >= k.min_p)) {
      return false;
    }
  }
  return true;
}

template <class R>
DDS_HD R zeroed() {  // a record with every byte 0
  R r;
  memset(&r, 0, sizeof r);
  return r;
}
DDS_HD Winner no_winner() {
  Winner w = zeroed<Winner>();
  w.id = -1;
  w.key = neg_inf_d();
  return w;
}
DDS_HD BlockPart no_part() {
  BlockPart b = zeroed<BlockPart>();
  b.block = -1;
  b.win = no_winner();
  return b;
}
DDS_HD void clear_share(Share* s, double m_ref) {
  memset(s, 0, sizeof *s);
  s->m_ref = m_ref;
  s->full = no_part();
  s->cut[0] = no_part();
  s->cut[1] = no_part();
}

DDS_HD Winner block_winner(const Call& c, const Row& w, const KRule& k, int32_t lo, int32_t hi) {
  Winner b = no_winner();
  for (int32_t t = lo; t < hi; ++t) {
    const Col col = column(c, w, t - c.off);
    if (!in_rule(k, col, t)) continue;
    const double v = (double)col.x + gumbel(w.q.seed, w.q.step, w.pos, (uint32_t)t, kSaltToken);
    if (b.id < 0 || v > b.key) {
      b.id = t;
      b.key = v;
      b.a = col.x;
      b.l = col.l;
    }
  }
  return b;
}

// This rank's share of the two-level sampler over the columns of rule k (docs/sampling.md §4),
// sums relative to m_ref, columns in increasing id order.
DDS_HD void make_share(const Call& c, const Row& w, const KRule& k, double m_ref, Share* s) {
  const int32_t B = kBlockSize;
  clear_share(s, m_ref);
  int ncut = 0;
  int32_t full_lo = 0, full_hi = 0;
  for (int32_t b = c.off / B; b <= (c.off + c.Vs - 1) / B; ++b) {
    const int32_t blo = b * B, bhi = blo + B < c.V ? blo + B : c.V;
    const int32_t lo = blo > c.off ? blo : c.off;
    const int32_t hi = bhi < c.off + c.Vs ? bhi : c.off + c.Vs;
    const bool full = lo == blo && hi == bhi;
    double sum = 0;
    bool any = false;
    for (int32_t t = lo; t < hi; ++t) {
      const Col col = column(c, w, t - c.off);
      if (!in_rule(k, col, t)) continue;
      sum += dexp((double)col.x - m_ref);
      any = true;
    }
    if (!any) continue;
    if (full) {
      const double score =
          m_ref + dlog(sum) + gumbel(w.q.seed, w.q.step, w.pos, (uint32_t)b, kSaltBlock);
      if (s->full.block < 0 || score > s->full.value) {
        s->full.block = b;
        s->full.value = score;
        full_lo = lo;
        full_hi = hi;
      }
    } else if (ncut < 2) {
      BlockPart& p = s->cut[ncut++];
      p.block = b;
      p.value = sum;
      p.win = block_winner(c, w, k, lo, hi);
    }
  }
  if (s->full.block >= 0) s->full.win = block_winner(c, w, k, full_lo, full_hi);
}

DDS_HD void merge_top2(int32_t* ids, float* vals, int32_t id, float v) {
  if (id < 0) return;
  if (ids[0] < 0 || before(v, id, vals[0], ids[0])) {
    ids[1] = ids[0];
    vals[1] = vals[0];
    ids[0] = id;
    vals[0] = v;
  } else if (ids[1] < 0 || before(v, id, vals[1], ids[1])) {
    ids[1] = id;
    vals[1] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// Round 0: STATS.
// ---------------------------------------------------------------------------------------------
DDS_HD void partial_stats_row(const Call& c, int32_t i, unsigned char* rowp) {
  Row w;
  make_row(c, i, false, &w);
  const Params& q = w.q;
  StatsHead& h = *reinterpret_cast<StatsHead*>(rowp);
  Cand* cs = reinterpret_cast<Cand*>(rowp + sizeof(StatsHead));
  memset(rowp, 0, (size_t)c.row_bytes[0]);
  h.magic = kMagic;
  h.vocab_offset = c.off;
  h.vocab_slice = c.Vs;
  h.top_l_id[0] = h.top_l_id[1] = h.top_a_id[0] = h.top_a_id[1] = -1;
  clear_share(&h.share, 0);
  const KRule k0 = rule_k0();
  int32_t n0 = 0;
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!col.in0) continue;
    ++n0;
    merge_top2(h.top_l_id, h.top_l, c.off + t, col.l);
    merge_top2(h.top_a_id, h.top_a, c.off + t, col.x);
  }
  h.n0 = n0;
  if (n0 == 0) return;
  const double ml = h.top_l[0], ma = h.top_a[0];
  const bool want_cand = !q.greedy && q.k > 0 && q.k <= c.C;
  int32_t nc = 0;
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!col.in0) continue;
    const double el = dexp((double)col.l - ml), ea = dexp((double)col.x - ma);
    h.zl += el;
    h.wl += el * ((double)col.l - ml);
    h.za += ea;
    h.wa += ea * ((double)col.x - ma);
    if (want_cand) {  // sorted insertion into the top-C list
      const int32_t id = c.off + t;
      if (nc == c.C && !before(col.x, id, cs[nc - 1].a, cs[nc - 1].id)) continue;
      int32_t e = nc < c.C ? nc++ : c.C - 1;
      while (e > 0 && before(col.x, id, cs[e - 1].a, cs[e - 1].id)) {
        cs[e] = cs[e - 1];
        --e;
      }
      cs[e].a = col.x;
      cs[e].id = id;
    }
  }
  h.n_cand = nc;
  if (q.greedy) return;
  make_share(c, w, k0, ma, &h.share);
}

}  // namespace shard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_ROW_H_
