// Vocabulary-parallel sampling (include/dds/dds_shard.h, docs/vocab_parallel.md): the record
// layouts and the per-row logic of every round and of the finish, written once for the host (the
// CPU reference, src/shard.cpp) and the device (src/cuda_shard.cu). Framework-free and
// allocation-free: a row is processed by one caller (a host loop iteration or one device thread),
// columns in increasing id order, so both backends compute the same sums in the same order.
#ifndef DDS_KERNELS_SHARD_CUH_
#define DDS_KERNELS_SHARD_CUH_

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__CUDACC__)
#include <cmath>
#endif

#include "dds/dds_shard.h"
#include "../common/dtype.h"
#include "../common/rng.h"

namespace dds {
namespace shard {

constexpr int kRadixRounds = 4;
constexpr int kBins = 256;
constexpr uint32_t kMagic = 0x30534444u;  // "DDS0" little-endian
constexpr int kMaxWorld = 64;             // DDS_SHARD_MAX_WORLD_SIZE

// ---------------------------------------------------------------------------------------------
// Record layouts (docs/vocab_parallel.md §3). Little-endian, natural alignment, every row record a
// multiple of 8 bytes. Changing any of these changes the protocol: bump kMagic.
// ---------------------------------------------------------------------------------------------
struct Winner {   // token winner of one block (or block part): argmax (a_t + G_t), ties lower id
  int32_t id;     // global token id, -1 = none
  float a;        // processed value a_t (fp32)
  float l;        // guided value l_t (fp32)
  int32_t pad;
  double key;     // (double)a_t + G(seed, step, pos, t, TOKEN)
};
struct BlockPart {  // one block's share
  int32_t block;    // global block id, -1 = none
  int32_t pad;
  double value;     // full block: score m_ref + log(s) + G_b; cut block: s = sum exp(a - m_ref)
  Winner win;
};
struct Share {       // a rank's share of the two-level sampler over one set of columns
  double m_ref;      // reference of the sums (round 0: the rank's max a; round KEPT: global max)
  BlockPart full;    // best block lying entirely in the slice (score, then lower block id)
  BlockPart cut[2];  // blocks cut by the slice boundaries (at most two; block -1 = none)
};
struct StatsHead {
  uint32_t magic;
  int32_t vocab_offset, vocab_slice;
  int32_t n0;      // finite, unbanned columns in the slice (|K0 ∩ slice|)
  int32_t n_cand;  // candidates that follow (<= C)
  int32_t top_l_id[2];
  float top_l[2];  // top-2 of l over K0 ∩ slice, order (value desc, id asc); id -1 = none
  int32_t top_a_id[2];
  float top_a[2];  // top-2 of a (processed values; = l for greedy rows)
  int32_t pad;
  double zl, wl;   // sum e, sum e (l - top_l[0]) with e = exp(l - top_l[0]) over K0 ∩ slice
  double za, wa;   // the same for a relative to top_a[0]
  Share share;     // over K0 ∩ slice, m_ref = top_a[0]
};
struct Cand {  // top-k candidate
  float a;
  int32_t id;
};
struct RadixRec {
  uint32_t count[kBins];
  double mass[kBins];
};
struct KeptRec {
  int32_t count;  // |K ∩ slice|
  int32_t pad;
  double z, w;    // sum e, sum e (a - M) with e = exp(a - M) over K ∩ slice, M the global max
  Share share;    // over K ∩ slice, m_ref = M
};
static_assert(sizeof(Winner) == 24, "layout");
static_assert(sizeof(BlockPart) == 40, "layout");
static_assert(sizeof(Share) == 128, "layout");
static_assert(sizeof(StatsHead) == 216, "layout");
static_assert(sizeof(Cand) == 8, "layout");
static_assert(sizeof(RadixRec) == 3072, "layout");
static_assert(sizeof(KeptRec) == 152, "layout");
static_assert(offsetof(StatsHead, n_cand) == 16 && offsetof(StatsHead, top_l_id) == 20 &&
                  offsetof(StatsHead, top_l) == 28 && offsetof(StatsHead, top_a_id) == 36 &&
                  offsetof(StatsHead, top_a) == 44 && offsetof(StatsHead, zl) == 56 &&
                  offsetof(StatsHead, wa) == 80 && offsetof(StatsHead, share) == 88,
              "layout");
static_assert(offsetof(Share, full) == 8 && offsetof(Share, cut) == 48, "layout");
static_assert(offsetof(BlockPart, value) == 8 && offsetof(BlockPart, win) == 16, "layout");
static_assert(offsetof(Winner, l) == 8 && offsetof(Winner, key) == 16, "layout");
static_assert(offsetof(RadixRec, mass) == 1024, "layout");
static_assert(offsetof(KeptRec, z) == 8 && offsetof(KeptRec, share) == 24, "layout");

// ---------------------------------------------------------------------------------------------
// Arithmetic helpers: correctly rounded fp32 steps and float64 libm on both sides.
// ---------------------------------------------------------------------------------------------
DDS_HD float neg_inf_f() { return bits_to_f32(0xff800000u); }
DDS_HD double neg_inf_d() {
  const uint64_t b = 0xfff0000000000000ull;
  double d;
  memcpy(&d, &b, 8);
  return d;
}
DDS_HD double dexp(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}
DDS_HD double dlog(double x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}
DDS_HD float fmul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DDS_HD float fsub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
DDS_HD float ffma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DDS_HD float fdiv_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DDS_HD bool f_isnan(float x) { return x != x; }
DDS_HD bool f_isinf(float x) { return x == -neg_inf_f() || x == neg_inf_f(); }

DDS_HD float load_val(const void* base, int32_t dtype, int64_t idx) {
  switch (dtype) {
    case DDS_DTYPE_F32: return static_cast<const float*>(base)[idx];
    case DDS_DTYPE_BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[idx]);
    default: return f16_to_f32(static_cast<const uint16_t*>(base)[idx]);
  }
}
DDS_HD void store_val(void* base, int32_t dtype, int64_t idx, float v) {
  switch (dtype) {
    case DDS_DTYPE_F32: static_cast<float*>(base)[idx] = v; break;
    case DDS_DTYPE_BF16: static_cast<uint16_t*>(base)[idx] = f32_to_bf16(v); break;
    default: static_cast<uint16_t*>(base)[idx] = f32_to_f16(v); break;
  }
}

// Order-preserving key of a (larger a -> larger key); -0 and +0 share the key of +0.
DDS_HD uint32_t order_key(float a) {
  if (a == 0.f) a = 0.f;
  const uint32_t b = f32_to_bits(a);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
DDS_HD float key_value(uint32_t k) {
  return bits_to_f32((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
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
struct Params {
  bool guided;
  int64_t uncond_first;
  float g;
  bool greedy;
  float invT;
  int32_t k;
  float p;
  float min_p;
  uint64_t seed;
  uint32_t step;
  int32_t status;
};

DDS_HD void request_rows(const dds_sample_args& a, int32_t r, int32_t* b, int32_t* e) {
  *b = a.row_offsets ? a.row_offsets[r] : r;
  *e = a.row_offsets ? a.row_offsets[r + 1] : r + 1;
}

DDS_HD Params request_params(const dds_sample_args& a, int32_t r) {
  Params q;
  q.status = 0;
  int32_t rb, re;
  request_rows(a, r, &rb, &re);
  float T = a.temperatures ? a.temperatures[r] : a.temperature;
  if (f_isnan(T) || T < 0.f || f_isinf(T)) {
    T = 1.f;
    q.status |= DDS_REQ_BAD_TEMPERATURE;
  }
  q.greedy = false;
  q.invT = 1.f;
  if (T == 0.f) {
    q.greedy = true;
  } else {
    q.invT = fdiv_rn(1.0f, T);
    if (f_isinf(q.invT)) q.greedy = true;
  }
  float g = a.guidance_scales ? a.guidance_scales[r] : a.guidance_scale;
  if (f_isnan(g) || f_isinf(g)) {
    g = 0.f;
    q.status |= DDS_REQ_BAD_GUIDANCE;
  }
  q.g = g;
  q.guided = false;
  q.uncond_first = 0;
  if (a.uncond_logits != nullptr && g != 0.f) {
    const int64_t first = a.uncond_row_offsets == nullptr ? (int64_t)rb : a.uncond_row_offsets[r];
    if (a.uncond_row_offsets == nullptr || first >= 0) {
      if (first < 0 || first + (re - rb) > a.uncond_num_rows) {
        q.status |= DDS_REQ_BAD_UNCOND_ROWS;
      } else {
        q.guided = true;
        q.uncond_first = first;
      }
    }
  }
  int32_t k = a.top_ks ? a.top_ks[r] : a.top_k;
  if (k < 0) {
    k = 0;
    q.status |= DDS_REQ_BAD_TOP_K;
  }
  q.k = k;
  float p = a.top_ps ? a.top_ps[r] : a.top_p;
  if (f_isnan(p)) {
    p = 1.f;
    q.status |= DDS_REQ_BAD_TOP_P;
  }
  q.p = p;
  float mp = a.min_ps ? a.min_ps[r] : a.min_p;
  if (f_isnan(mp) || mp < 0.f) {
    mp = 0.f;
    q.status |= DDS_REQ_BAD_MIN_P;
  }
  if (mp > 1.f) mp = 1.f;
  q.min_p = mp;
  q.seed = a.seeds ? a.seeds[r] : a.seed;
  q.step = a.steps ? a.steps[r] : a.step;
  return q;
}

// Request of row i (last r with row_offsets[r] <= i, skipping empty requests).
DDS_HD int32_t row_request(const dds_sample_args& a, int32_t i) {
  if (!a.row_offsets) return i;
  int32_t lo = 0, hi = a.num_requests;
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) >> 1;
    if (a.row_offsets[mid] <= i) lo = mid;
    else hi = mid;
  }
  return lo;
}

// Everything a row needs: the arguments (normalised: strides resolved), the shard, the plan.
struct Call {
  dds_sample_args a;
  int32_t V;          // full vocabulary
  int32_t off, Vs;    // this rank's slice
  int32_t rank, R;
  int32_t C;          // candidates per rank and row in round 0
  int32_t first_radix, kept_round;
  int64_t row_bytes[DDS_SHARD_MAX_ROUNDS];
  int64_t record_bytes[DDS_SHARD_MAX_ROUNDS];
  int64_t offset[DDS_SHARD_MAX_ROUNDS];
  const unsigned char* gathered;
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
// max_top_k and flagged DDS_REQ_BAD_TOP_K.
DDS_HD Params call_params(const Call& c, int32_t r) {
  Params q = request_params(c.a, r);
  if (q.k > c.C && q.k < c.V) {
    q.k = c.C;
    q.status |= DDS_REQ_BAD_TOP_K;
  }
  return q;
}

// with_order: compute the rank order from the gathered round-0 headers (rounds >= 1, finish).
DDS_HD void make_row(const Call& c, int32_t i, bool with_order, Row* w) {
  w->i = i;
  w->req = row_request(c.a, i);
  int32_t rb, re;
  request_rows(c.a, w->req, &rb, &re);
  w->j = i - rb;
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
DDS_HD Col column(const Call& c, const Row& w, int32_t t) {
  const dds_sample_args& a = c.a;
  const Params& q = w.q;
  const float cv = load_val(a.logits, a.dtype, (int64_t)w.i * a.row_stride + t);
  float v = cv;
  if (q.guided) {
    const float u = load_val(a.uncond_logits, a.dtype, (q.uncond_first + w.j) * a.uncond_row_stride + t);
    v = (cv == neg_inf_f() || u == neg_inf_f()) ? neg_inf_f() : ffma_rn(q.g, fsub_rn(cv, u), cv);
  }
  if (c.off + t == a.banned_token) v = neg_inf_f();
  if (f_isnan(v)) v = neg_inf_f();
  if (v == -neg_inf_f()) v = FLT_MAX;
  Col o;
  o.l = v;
  o.in0 = v > neg_inf_f();
  float xv = v;
  if (!q.greedy) {
    xv = fmul_rn(v, q.invT);
    if (xv == -neg_inf_f()) xv = FLT_MAX;
    else if (xv == neg_inf_f() && o.in0) xv = -FLT_MAX;
  }
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

DDS_HD Winner no_winner() {
  Winner w;
  memset(&w, 0, sizeof w);
  w.id = -1;
  w.key = neg_inf_d();
  return w;
}
DDS_HD BlockPart no_part() {
  BlockPart b;
  memset(&b, 0, sizeof b);
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

// ---------------------------------------------------------------------------------------------
// Global round-0 statistics and the filtered set of a row.
// ---------------------------------------------------------------------------------------------
struct Global {
  int32_t n0;
  int32_t l_id[2];
  float l_val[2];
  int32_t a_id[2];
  float a_val[2];
  double Zl, Wl, Za, Wa;
  double Ml, Ma;
};

DDS_HD Global global_stats(const Call& c, const Row& w) {
  Global g;
  memset(&g, 0, sizeof g);
  g.l_id[0] = g.l_id[1] = g.a_id[0] = g.a_id[1] = -1;
  for (int32_t o = 0; o < w.nranks; ++o) {
    const StatsHead& h = stats_of(c, w.order[o], w.i);
    g.n0 += h.n0;
    for (int e = 0; e < 2; ++e) {
      merge_top2(g.l_id, g.l_val, h.top_l_id[e], h.top_l[e]);
      merge_top2(g.a_id, g.a_val, h.top_a_id[e], h.top_a[e]);
    }
  }
  if (g.n0 == 0) return g;
  g.Ml = g.l_val[0];
  g.Ma = g.a_val[0];
  for (int32_t o = 0; o < w.nranks; ++o) {
    const StatsHead& h = stats_of(c, w.order[o], w.i);
    if (h.n0 == 0) continue;
    const double dl = (double)h.top_l[0] - g.Ml, da = (double)h.top_a[0] - g.Ma;
    const double fl = dexp(dl), fa = dexp(da);
    g.Zl += h.zl * fl;
    g.Wl += fl * (h.wl + dl * h.zl);
    g.Za += h.za * fa;
    g.Wa += fa * (h.wa + da * h.za);
  }
  return g;
}

// k-way merge of the ranks' sorted candidate lists: the n-th (0-based) candidate overall.
struct Merge {
  int32_t pos[kMaxWorld];
};
DDS_HD bool merge_next(const Call& c, const Row& w, Merge* m, Cand* out) {
  int32_t best = -1;
  Cand bc;
  bc.a = 0;
  bc.id = 0;
  for (int32_t o = 0; o < w.nranks; ++o) {
    const int32_t r = w.order[o];
    int32_t n = stats_of(c, r, w.i).n_cand;
    n = n < 0 ? 0 : (n > c.C ? c.C : n);  // untrusted buffer
    if (m->pos[o] >= n) continue;
    const Cand x = cands_of(c, r, w.i)[m->pos[o]];
    if (best < 0 || before(x.a, x.id, bc.a, bc.id)) {
      best = o;
      bc = x;
    }
  }
  if (best < 0) return false;
  ++m->pos[best];
  *out = bc;
  return true;
}
// The merged candidates in order, from the gathered records (reset() restarts). The CUDA kernels
// use an equivalent source over the merged list pre-built in shared memory.
struct GatheredMerge {
  const Call* c;
  const Row* w;
  Merge m;
  DDS_HD void reset() { memset(&m, 0, sizeof m); }
  DDS_HD bool next(Cand* out) { return merge_next(*c, *w, &m, out); }
};

// Radix-select state after the first `rounds_done` radix rounds.
struct RadixState {
  uint32_t prefix;
  double cum;      // mass of the tokens before the prefix's subtree, in order
  int64_t above;   // their count
  bool keep_all;
  int64_t final_count;  // count in the prefix's bin at the last level walked
};

// The gathered radix bins of a row, summed over the ranks in offset order (count, then mass).
// Bins::get(d, b, &cnt, &mass) gives bin b of radix round d (0-based). GatheredBins reads the
// gathered records directly (CPU; any caller); the CUDA kernels pre-sum them into shared memory
// in the same order (bit-identical sums).
struct GatheredBins {
  const Call* c;
  const Row* w;
  DDS_HD void get(int d, int b, int64_t* cnt_out, double* mass_out) const {
    int64_t cnt = 0;
    double mass = 0;
    for (int32_t o = 0; o < w->nranks; ++o) {
      const RadixRec& rr =
          *reinterpret_cast<const RadixRec*>(rec(*c, c->first_radix + d, w->order[o], w->i));
      cnt += rr.count[b];
      mass += rr.mass[b];
    }
    *cnt_out = cnt;
    *mass_out = mass;
  }
};

// Z1 of top-p without top-k: the global sum of exp(a - M_a) over K0, as the sum of the bins of the
// first radix round (bins from the top, each summed over the ranks in offset order). Summed from
// the same float64 terms as the walk's running mass (not from round 0's sums), so that the cut is
// decided in one precision on every backend.
template <class Bins>
DDS_HD double radix_z1(const Bins& bins) {
  double z = 0;
  for (int b = kBins - 1; b >= 0; --b) {
    int64_t cnt;
    double mass;
    bins.get(0, b, &cnt, &mass);
    if (cnt) z += mass;
  }
  return z;
}

template <class Bins>
DDS_HD RadixState radix_walk(const Bins& bins, double target, int rounds_done) {
  RadixState s;
  s.prefix = 0;
  s.cum = 0;
  s.above = 0;
  s.keep_all = false;
  s.final_count = 0;
  for (int d = 0; d < rounds_done; ++d) {
    int found = -1, last = -1;
    double cum = s.cum, cum_last = s.cum;
    int64_t above = s.above, above_last = s.above, cnt_found = 0, cnt_last = 0;
    for (int b = kBins - 1; b >= 0; --b) {
      int64_t cnt = 0;
      double mass = 0;
      bins.get(d, b, &cnt, &mass);
      if (cnt == 0) continue;
      if (cum + mass >= target) {
        found = b;
        cnt_found = cnt;
        break;
      }
      last = b;
      cnt_last = cnt;
      cum_last = cum;
      above_last = above;
      cum += mass;
      above += cnt;
    }
    if (found < 0) {
      if (d == 0 || last < 0) {  // no crossing at all (rounding): keep every token
        s.keep_all = true;
        return s;
      }
      // The parent bin crossed but its children do not (the sums were grouped differently):
      // the cut is at the end of the subtree, so descend into its last non-empty bin.
      found = last;
      cnt_found = cnt_last;
      cum = cum_last;
      above = above_last;
    }
    s.prefix = (s.prefix << 8) | (uint32_t)found;
    s.cum = cum;
    s.above = above;
    s.final_count = cnt_found;
  }
  return s;
}

// The filtered set of row w, except the radix threshold of top-p without top-k (k.radix set, see
// k_rule_radix). ms: the merged candidates (MergeSource: reset(), next(Cand*)); NULL leaves the
// candidate threshold unresolved (k.cand set, no threshold: for callers that only need the kind).
template <class MergeSource>
DDS_HD KRule k_rule_base_t(const Call& c, const Row& w, const Global& g, MergeSource* ms) {
  KRule k = rule_k0();
  const Params& q = w.q;
  if (q.greedy || g.n0 == 0) return k;
  const bool use_k = q.k > 0 && q.k < g.n0;
  const bool use_p = q.p < 1.f;
  const bool use_mp = q.min_p > 0.f;
  if (!use_k && !use_p && !use_mp) return k;
  k.filtered = true;
  k.M = g.Ma;
  k.use_min_p = use_mp;
  k.min_p = (double)q.min_p;
  if ((use_k || use_p) && q.k > 0 && q.k <= c.C) {
    k.cand = true;
    if (!ms) return k;
    int64_t n1 = use_k ? q.k : g.n0;
    int64_t n2 = n1;
    ms->reset();
    Cand x, last;
    last.a = 0;
    last.id = -1;
    if (use_p) {  // docs/sampling.md §3 step 2, on the exact candidate values
      double Z1 = 0;
      int64_t n = 0;
      while (n < n1 && ms->next(&x)) {
        Z1 += dexp((double)x.a - g.Ma);
        ++n;
      }
      n1 = n;
      n2 = n1;
      const double target = (double)q.p * Z1;
      double S = 0;
      ms->reset();
      for (int64_t e = 0; e < n1; ++e) {
        ms->next(&x);
        if (e > 0 && !(S < target)) {
          n2 = e;
          break;
        }
        last = x;
        S += dexp((double)x.a - g.Ma);
      }
    } else {
      int64_t n = 0;
      while (n < n1 && ms->next(&x)) {
        last = x;
        ++n;
      }
      n2 = n;
    }
    k.has_thr = n2 > 0 && last.id >= 0;
    k.vkey = order_key(last.a);
    k.id_thr = last.id;
  } else if (use_p) {
    k.radix = true;
  }
  return k;
}
DDS_HD KRule k_rule_base(const Call& c, const Row& w, const Global& g) {
  GatheredMerge ms{&c, &w, {}};
  return k_rule_base_t(c, w, g, &ms);
}

// Resolves the radix threshold (rounds >= KEPT) from the gathered bins of all radix rounds.
template <class Bins>
DDS_HD void k_rule_radix(const Call& c, const Row& w, const Global& g, const Bins& bins, KRule* kp) {
  KRule& k = *kp;
  if (!k.radix || c.first_radix < 0) return;
  {
    const double target = (double)w.q.p * radix_z1(bins);
    const RadixState s = radix_walk(bins, target, kRadixRounds);
    if (!s.keep_all) {
      const double e = dexp((double)key_value(s.prefix) - g.Ma);
      double S = s.cum;
      int64_t j = s.final_count;
      for (int64_t jj = 1; jj <= s.final_count; ++jj) {
        S += e;
        if (S >= target) {
          j = jj;
          break;
        }
      }
      k.has_thr = true;
      k.vkey = s.prefix;
      k.tie_keep = j;
      k.id_thr = -1;  // set per rank by localize()
    }
  }
}

// The filtered set of row w. for_kept: also resolve the radix threshold (rounds >= KEPT).
DDS_HD KRule k_rule(const Call& c, const Row& w, const Global& g, bool for_kept) {
  KRule k = k_rule_base(c, w, g);
  if (for_kept) {
    GatheredBins bins{&c, &w};
    k_rule_radix(c, w, g, bins, &k);
  }
  return k;
}

// Radix path: turns the global count of kept ties into this rank's last kept id (the ties of the
// ranks with lower offsets come first), so the rule becomes stateless.
// localize_keep: how many of this rank's ties it keeps (<= 0: none), and (*mine) how many ties it
// has (its last-round count of the threshold key): keep >= mine keeps them all.
DDS_HD int64_t localize_keep(const Call& c, const Row& w, const KRule& k, int64_t* mine) {
  int64_t before_me = 0;
  const int32_t last = c.first_radix + kRadixRounds - 1;
  *mine = 0;
  for (int32_t o = 0; o < w.nranks; ++o) {
    const RadixRec& rr = *reinterpret_cast<const RadixRec*>(rec(c, last, w.order[o], w.i));
    if (w.order[o] == c.rank) {
      *mine = rr.count[k.vkey & 255u];
      break;
    }
    before_me += rr.count[k.vkey & 255u];
  }
  return k.tie_keep - before_me;
}
DDS_HD void localize(const Call& c, const Row& w, KRule* k) {
  if (!k->radix || !k->has_thr) return;
  int64_t mine;
  int64_t keep = localize_keep(c, w, *k, &mine);
  k->id_thr = c.off - 1;  // none of this rank's ties
  if (keep <= 0) return;
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!col.in0 || order_key(col.x) != k->vkey) continue;
    k->id_thr = c.off + t;
    if (--keep == 0) break;
  }
}

// ---------------------------------------------------------------------------------------------
// Rounds RADIX and KEPT.
// ---------------------------------------------------------------------------------------------
DDS_HD void partial_radix_row(const Call& c, int32_t round, int32_t i, unsigned char* rowp) {
  RadixRec& rr = *reinterpret_cast<RadixRec*>(rowp);
  memset(&rr, 0, sizeof rr);
  Row w;
  make_row(c, i, true, &w);
  const Global g = global_stats(c, w);
  const KRule k = k_rule(c, w, g, false);
  if (!k.radix) return;
  const int d = round - c.first_radix;  // bytes already decided
  const GatheredBins bins{&c, &w};
  const double target = d > 0 ? (double)w.q.p * radix_z1(bins) : 0.0;
  const RadixState s = radix_walk(bins, target, d);
  if (s.keep_all) return;
  const int shift = 24 - 8 * d;
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!col.in0) continue;
    const uint32_t key = order_key(col.x);
    if (d > 0 && (key >> (32 - 8 * d)) != s.prefix) continue;
    const uint32_t bin = (key >> shift) & 255u;
    rr.count[bin] += 1;
    rr.mass[bin] += dexp((double)col.x - g.Ma);
  }
}

DDS_HD void partial_kept_row(const Call& c, int32_t i, unsigned char* rowp) {
  KeptRec& kr = *reinterpret_cast<KeptRec*>(rowp);
  memset(&kr, 0, sizeof kr);
  clear_share(&kr.share, 0);
  Row w;
  make_row(c, i, true, &w);
  const Global g = global_stats(c, w);
  KRule k = k_rule(c, w, g, true);
  if (!k.filtered) return;
  localize(c, w, &k);
  for (int32_t t = 0; t < c.Vs; ++t) {
    const Col col = column(c, w, t);
    if (!in_rule(k, col, c.off + t)) continue;
    const double e = dexp((double)col.x - k.M);
    kr.count += 1;
    kr.z += e;
    kr.w += e * ((double)col.x - k.M);
  }
  make_share(c, w, k, k.M, &kr.share);
}

// ---------------------------------------------------------------------------------------------
// Finish.
// ---------------------------------------------------------------------------------------------
DDS_HD const Share& share_of(const Call& c, bool kept, int32_t rank, int32_t row) {
  if (kept) return reinterpret_cast<const KeptRec*>(rec(c, c.kept_round, rank, row))->share;
  return stats_of(c, rank, row).share;
}

// Combines the shares of all ranks into the winning token.
DDS_HD Winner combine_shares(const Call& c, const Row& w, bool kept, double M) {
  int32_t best_block = -1;
  double best_score = neg_inf_d();
  Winner best = no_winner();
  for (int32_t o = 0; o < w.nranks; ++o) {
    const Share& sh = share_of(c, kept, w.order[o], w.i);
    const BlockPart* parts[3] = {&sh.full, &sh.cut[0], &sh.cut[1]};
    for (int e = 0; e < 3; ++e) {
      const BlockPart& p = *parts[e];
      if (p.block < 0) continue;
      double score;
      Winner win = p.win;
      if (e == 0) {
        score = p.value;
      } else {
        // A cut block: the first rank (in offset order) holding a part of it sums all parts.
        bool seen = false;
        for (int32_t o2 = 0; o2 < o && !seen; ++o2) {
          const Share& s2 = share_of(c, kept, w.order[o2], w.i);
          seen = s2.cut[0].block == p.block || s2.cut[1].block == p.block;
        }
        if (seen) continue;
        double s = 0;
        for (int32_t o2 = o; o2 < w.nranks; ++o2) {
          const Share& s2 = share_of(c, kept, w.order[o2], w.i);
          const double f = s2.m_ref == M ? 1.0 : dexp(s2.m_ref - M);
          for (int e2 = 0; e2 < 2; ++e2) {
            if (s2.cut[e2].block != p.block) continue;
            s += s2.cut[e2].value * f;
            if (win_before(s2.cut[e2].win, win)) win = s2.cut[e2].win;
          }
        }
        score = M + dlog(s) + gumbel(w.q.seed, w.q.step, w.pos, (uint32_t)p.block, kSaltBlock);
      }
      if (best_block < 0 || score > best_score || (score == best_score && p.block < best_block)) {
        best_block = p.block;
        best_score = score;
        best = win;
      }
    }
  }
  return best;
}

// What the probs of a row need after finish_core.
struct FinishState {
  bool empty;     // K0 empty: zero probs
  bool onehot;    // processed stats of a greedy row: one-hot of the token
  bool guided;    // guided stats: softmax(l) over K0
  int32_t token;
  double M, logS;
  KRule k;        // the filtered set (processed stats of filtered rows; radix resolved)
};

// Writes row w's scalar outputs (tokens, argmax, logprobs, confidence, margin, entropy) from the
// gathered records; the radix threshold (if any) from `bins`. Returns what the probs need.
template <class Bins, class MergeSource>
DDS_HD FinishState finish_core(const Call& c, const Row& w, const Global& g, const Bins& bins,
                               MergeSource* ms) {
  const dds_sample_args& a = c.a;
  const int32_t i = w.i;
  const Params& q = w.q;
  FinishState f;
  memset(&f, 0, sizeof f);
  f.k = rule_k0();
  if (g.n0 == 0) {
    f.empty = true;
    if (a.tokens) a.tokens[i] = 0;
    if (a.argmax) a.argmax[i] = 0;
    if (a.logprobs) a.logprobs[i] = neg_inf_f();
    if (a.confidence) a.confidence[i] = 0.f;
    if (a.margin) a.margin[i] = 0.f;
    if (a.entropy) a.entropy[i] = 0.f;
    return f;
  }
  const int32_t amax = g.l_id[0];
  KRule k = k_rule_base_t(c, w, g, ms);
  k_rule_radix(c, w, g, bins, &k);
  int32_t token;
  Winner win = no_winner();
  if (q.greedy) {
    token = amax;
  } else {
    win = combine_shares(c, w, k.filtered, g.Ma);
    token = win.id;
  }
  // docs/sampling.md §5.
  double logprob = 0, conf = 1, margin = 1, ent = 0, M = 0, logS = 0;
  const bool guided = a.stats == DDS_STATS_GUIDED;
  const bool onehot = !guided && q.greedy;
  if (!onehot) {
    double Z, W, x_tok, x2;
    int64_t count;
    if (guided) {
      M = g.Ml;
      Z = g.Zl;
      W = g.Wl;
      count = g.n0;
      x_tok = q.greedy ? (double)g.l_val[0] : (double)win.l;
      x2 = g.l_val[1];
    } else {
      M = g.Ma;
      if (k.filtered) {
        Z = 0;
        W = 0;
        count = 0;
        for (int32_t o = 0; o < w.nranks; ++o) {
          const KeptRec& kr = *reinterpret_cast<const KeptRec*>(rec(c, c.kept_round, w.order[o], i));
          Z += kr.z;
          W += kr.w;
          count += kr.count;
        }
      } else {
        Z = g.Za;
        W = g.Wa;
        count = g.n0;
      }
      x_tok = win.a;
      x2 = g.a_val[1];
    }
    logS = dlog(Z);
    logprob = (x_tok - M) - logS;
    conf = dexp(-logS);
    const double p2 = count >= 2 ? dexp((x2 - M) - logS) : 0.0;
    margin = conf - p2;
    ent = logS - W / Z;
    if (ent < 0) ent = 0;
  }
  if (a.tokens) a.tokens[i] = token;
  if (a.argmax) a.argmax[i] = amax;
  if (a.logprobs) a.logprobs[i] = (float)logprob;
  if (a.confidence) a.confidence[i] = (float)conf;
  if (a.margin) a.margin[i] = (float)margin;
  if (a.entropy) a.entropy[i] = (float)ent;
  f.onehot = onehot;
  f.guided = guided;
  f.token = token;
  f.M = M;
  f.logS = logS;
  f.k = (!guided && k.filtered) ? k : rule_k0();  // the support: K0 (guided, unfiltered) or K
  return f;
}

// probs of column t (local) of row w; f.k localized (localize()) when it is the radix rule.
DDS_HD float finish_prob_col(const FinishState& f, const Col& col, int32_t id) {
  if (f.empty) return 0.f;
  if (f.onehot) return id == f.token ? 1.f : 0.f;
  return in_rule(f.k, col, id) ? (float)dexp(((double)(f.guided ? col.l : col.x) - f.M) - f.logS)
                               : 0.f;
}
DDS_HD float finish_prob(const Call& c, const Row& w, const FinishState& f, int32_t t) {
  if (f.empty || f.onehot) return finish_prob_col(f, Col(), c.off + t);
  return finish_prob_col(f, column(c, w, t), c.off + t);
}

// Writes row i's outputs; returns the row's DDS_REQ_EMPTY_ROW bit (request flags are the
// caller's: they are per request).
DDS_HD int32_t finish_row(const Call& c, int32_t i) {
  const dds_sample_args& a = c.a;
  Row w;
  make_row(c, i, true, &w);
  const Global g = global_stats(c, w);
  const GatheredBins bins{&c, &w};
  GatheredMerge ms{&c, &w, {}};
  FinishState f = finish_core(c, w, g, bins, &ms);
  if (a.probs) {
    localize(c, w, &f.k);
    const int64_t base = (int64_t)i * a.probs_row_stride;
    for (int32_t t = 0; t < c.Vs; ++t) store_val(a.probs, a.probs_dtype, base + t, finish_prob(c, w, f, t));
  }
  return f.empty ? DDS_REQ_EMPTY_ROW : 0;
}

}  // namespace shard
}  // namespace dds

#endif  // DDS_KERNELS_SHARD_CUH_
