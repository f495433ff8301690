// Vocabulary-parallel exact sampling (include/dds/dds_shard.h, docs/vocab_parallel.md): the C ABI,
// validation, and the CPU reference of the partial rounds and the finish.
//
// Each rank holds columns [off, off + Vs) of every row. Round 0 (STATS) writes per row the
// statistics of its slice (counts, top-2 of l and of a, sum-exp and entropy terms relative to its
// own maxima), its share of the two-level sampler over the unfiltered set (best full block, the at
// most two blocks cut by its slice boundaries, each with its token winner) and, when top-k may be
// on, its top-C candidates. Rounds RADIX (4, only when top-p may be on) find the top-p threshold
// of rows whose nucleus is not decided by candidates: a radix select on the 32-bit
// order-preserving key of a, one byte per round, 256 bins of (count, mass). Round KEPT (when any
// filter may be on) writes the sums and the sampler share over the filtered set, relative to the
// global maximum. The finish combines everything; every rank gets the same outputs.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "dds/dds_shard.h"
#include "dtype.h"
#include "internal.h"
#include "rng.h"

namespace dds {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr uint32_t kMagic = 0x30534444u;  // "DDS0" little-endian
constexpr int kRadixRounds = 4;
constexpr int kBins = 256;

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
struct Share {      // a rank's share of the two-level sampler over one set of columns
  double m_ref;     // reference of the sums (round 0: the rank's max a; round KEPT: global max)
  BlockPart full;   // best block lying entirely in the slice (score, then lower block id)
  BlockPart cut[2]; // blocks cut by the slice boundaries (at most two; block -1 = none)
};
struct StatsHead {
  uint32_t magic;
  int32_t vocab_offset, vocab_slice;
  int32_t n0;        // finite, unbanned columns in the slice (|K0 ∩ slice|)
  int32_t n_cand;    // candidates that follow (<= C)
  int32_t top_l_id[2];
  float top_l[2];    // top-2 of l over K0 ∩ slice, order (value desc, id asc); id -1 = none
  int32_t top_a_id[2];
  float top_a[2];    // top-2 of a (processed values; = l for greedy rows)
  int32_t pad;
  double zl, wl;     // sum e, sum e (l - top_l[0]) with e = exp(l - top_l[0]) over K0 ∩ slice
  double za, wa;     // the same for a relative to top_a[0]
  Share share;       // over K0 ∩ slice, m_ref = top_a[0]
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
// The byte offsets documented in docs/vocab_parallel.md §3.
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
// Helpers copied from the CPU backend (docs/sampling.md §1-2), so that both read the same values.
// ---------------------------------------------------------------------------------------------
float load(const void* base, int32_t dtype, int64_t idx) {
  switch (dtype) {
    case DDS_DTYPE_F32: return static_cast<const float*>(base)[idx];
    case DDS_DTYPE_BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[idx]);
    default: return f16_to_f32(static_cast<const uint16_t*>(base)[idx]);
  }
}
void store(void* base, int32_t dtype, int64_t idx, float v) {
  switch (dtype) {
    case DDS_DTYPE_F32: static_cast<float*>(base)[idx] = v; break;
    case DDS_DTYPE_BF16: static_cast<uint16_t*>(base)[idx] = f32_to_bf16(v); break;
    default: static_cast<uint16_t*>(base)[idx] = f32_to_f16(v); break;
  }
}
inline float sanitize(float x) {
  if (std::isnan(x)) return -kInf;
  if (x == kInf) return FLT_MAX;
  return x;
}

struct Params {
  bool guided = false;
  int64_t uncond_first = 0;
  float g = 0.f;
  bool greedy = false;
  float invT = 1.f;
  int32_t k = 0;
  float p = 1.f;
  float min_p = 0.f;
  uint64_t seed = 0;
  uint32_t step = 0;
  int32_t status = 0;
};

Params request_params(const dds_sample_args& a, int32_t r, int32_t rows_in_request) {
  Params q;
  float T = a.temperatures ? a.temperatures[r] : a.temperature;
  if (std::isnan(T) || T < 0.f || std::isinf(T)) {
    T = 1.f;
    q.status |= DDS_REQ_BAD_TEMPERATURE;
  }
  if (T == 0.f) {
    q.greedy = true;
  } else {
    q.invT = 1.0f / T;
    if (std::isinf(q.invT)) q.greedy = true;
  }
  float g = a.guidance_scales ? a.guidance_scales[r] : a.guidance_scale;
  if (!std::isfinite(g)) {
    g = 0.f;
    q.status |= DDS_REQ_BAD_GUIDANCE;
  }
  q.g = g;
  if (a.uncond_logits != nullptr && g != 0.f) {
    int64_t first = a.uncond_row_offsets == nullptr ? (a.row_offsets ? a.row_offsets[r] : r)
                                                    : a.uncond_row_offsets[r];
    if (a.uncond_row_offsets == nullptr || first >= 0) {
      if (first < 0 || first + rows_in_request > a.uncond_num_rows) {
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
  if (std::isnan(p)) {
    p = 1.f;
    q.status |= DDS_REQ_BAD_TOP_P;
  }
  q.p = p;
  float mp = a.min_ps ? a.min_ps[r] : a.min_p;
  if (std::isnan(mp) || mp < 0.f) {
    mp = 0.f;
    q.status |= DDS_REQ_BAD_MIN_P;
  }
  if (mp > 1.f) mp = 1.f;
  q.min_p = mp;
  q.seed = a.seeds ? a.seeds[r] : a.seed;
  q.step = a.steps ? a.steps[r] : a.step;
  return q;
}

// Order-preserving key of a (larger a -> larger key); -0 and +0 share the key of +0.
inline uint32_t order_key(float a) {
  if (a == 0.f) a = 0.f;
  const uint32_t b = f32_to_bits(a);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
inline float key_value(uint32_t k) {
  return bits_to_f32((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
// (value desc, id asc)
inline bool before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}
inline bool win_before(const Winner& x, const Winner& y) {  // x beats y
  if (x.id < 0) return false;
  if (y.id < 0) return true;
  return x.key > y.key || (x.key == y.key && x.id < y.id);
}

// ---------------------------------------------------------------------------------------------
// The plan (host only).
// ---------------------------------------------------------------------------------------------
struct Plan {
  int32_t num_rounds = 0;
  int32_t kind[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t row_bytes[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t record_bytes[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t offset[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t total = 0;
  int32_t C = 0;           // candidates per rank and row in round 0
  int32_t first_radix = -1;
  int32_t kept_round = -1;
};

Plan make_plan(const dds_sample_args& a, const dds_shard_args& sh) {
  Plan p;
  const bool may_k = a.top_ks != nullptr || a.top_k > 0;
  const bool may_p = a.top_ps != nullptr || a.top_p < 1.f;
  const bool may_mp = a.min_ps != nullptr || a.min_p > 0.f;
  p.C = may_k ? sh.max_top_k : 0;
  auto add = [&](int32_t kind, int64_t row_bytes) {
    const int32_t q = p.num_rounds++;
    p.kind[q] = kind;
    p.row_bytes[q] = row_bytes;
    p.record_bytes[q] = row_bytes * a.num_rows;
    p.offset[q] = p.total;
    p.total += p.record_bytes[q] * sh.world_size;
  };
  add(DDS_SHARD_ROUND_STATS, (int64_t)sizeof(StatsHead) + (int64_t)sizeof(Cand) * p.C);
  if (may_p) {
    p.first_radix = p.num_rounds;
    for (int i = 0; i < kRadixRounds; ++i) add(DDS_SHARD_ROUND_RADIX, sizeof(RadixRec));
  }
  if (may_k || may_p || may_mp) {
    p.kept_round = p.num_rounds;
    add(DDS_SHARD_ROUND_KEPT, sizeof(KeptRec));
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// One call's context: the arguments, the plan, row -> request mapping, parameters.
// ---------------------------------------------------------------------------------------------
struct Ctx {
  dds_sample_args a;
  dds_shard_args sh;
  int32_t V = 0;
  Plan plan;
  std::vector<int32_t> row_req;   // request of each row
  std::vector<int32_t> row_j;     // index within the request
  std::vector<Params> params;     // per request
  const unsigned char* gathered = nullptr;
  std::vector<int32_t> rank_order;  // ranks sorted by vocab offset (from round 0 headers)

  void setup() {
    params.resize(a.num_requests);
    row_req.resize(a.num_rows);
    row_j.resize(a.num_rows);
    for (int32_t r = 0; r < a.num_requests; ++r) {
      const int32_t b = a.row_offsets ? a.row_offsets[r] : r;
      const int32_t e = a.row_offsets ? a.row_offsets[r + 1] : r + 1;
      params[r] = request_params(a, r, e - b);
      for (int32_t i = b; i < e; ++i) {
        row_req[i] = r;
        row_j[i] = i - b;
      }
    }
  }
  uint32_t pos(int32_t i) const {
    return (uint32_t)(a.positions ? a.positions[i] : row_j[i]);
  }
  const unsigned char* rec(int32_t round, int32_t rank, int32_t row) const {
    return gathered + plan.offset[round] + plan.record_bytes[round] * rank +
           plan.row_bytes[round] * row;
  }
  const StatsHead& stats(int32_t rank, int32_t row) const {
    return *reinterpret_cast<const StatsHead*>(rec(0, rank, row));
  }
  const Cand* cands(int32_t rank, int32_t row) const {
    return reinterpret_cast<const Cand*>(rec(0, rank, row) + sizeof(StatsHead));
  }
};

// Values of row i of this rank's slice (§2): l, x (= a; = l for greedy rows), membership in K0.
int32_t eval_row(const Ctx& c, int32_t i, const Params& q, std::vector<float>* l,
                 std::vector<float>* x, std::vector<char>* k0) {
  const dds_sample_args& a = c.a;
  const int32_t Vs = c.sh.vocab_slice, off = c.sh.vocab_offset;
  const int32_t j = c.row_j[i];
  int32_t n0 = 0;
  for (int32_t t = 0; t < Vs; ++t) {
    const float cv = load(a.logits, a.dtype, (int64_t)i * a.row_stride + t);
    float v = cv;
    if (q.guided) {
      const float u = load(a.uncond_logits, a.dtype, (q.uncond_first + j) * a.uncond_row_stride + t);
      v = (cv == -kInf || u == -kInf) ? -kInf : std::fma(q.g, cv - u, cv);
    }
    if (off + t == a.banned_token) v = -kInf;
    v = sanitize(v);
    (*l)[t] = v;
    (*k0)[t] = v > -kInf;
    n0 += (*k0)[t];
    float xv = v;
    if (!q.greedy) {
      xv = v * q.invT;
      if (xv == kInf) xv = FLT_MAX;
      else if (xv == -kInf && v > -kInf) xv = -FLT_MAX;
    }
    (*x)[t] = xv;
  }
  return n0;
}

Winner no_winner() {
  Winner w;
  std::memset(&w, 0, sizeof w);
  w.id = -1;
  w.key = -kInfD;
  return w;
}
BlockPart no_part() {
  BlockPart b;
  std::memset(&b, 0, sizeof b);
  b.block = -1;
  b.win = no_winner();
  return b;
}

Winner block_winner(const Ctx& c, const std::vector<float>& x, const std::vector<float>& l,
                    const std::vector<char>& in, int32_t lo, int32_t hi, const Params& q,
                    uint32_t pos) {
  const int32_t off = c.sh.vocab_offset;
  Winner w = no_winner();
  for (int32_t t = lo; t < hi; ++t) {
    if (!in[t - off]) continue;
    const double v = (double)x[t - off] + gumbel(q.seed, q.step, pos, (uint32_t)t, kSaltToken);
    if (w.id < 0 || v > w.key) {
      w.id = t;
      w.key = v;
      w.a = x[t - off];
      w.l = l[t - off];
    }
  }
  return w;
}

// This rank's share of the two-level sampler over the columns `in` of its slice (§4 of
// docs/sampling.md), sums relative to m_ref.
Share make_share(const Ctx& c, const std::vector<float>& x, const std::vector<float>& l,
                 const std::vector<char>& in, double m_ref, const Params& q, uint32_t pos) {
  const int32_t off = c.sh.vocab_offset, Vs = c.sh.vocab_slice, V = c.V, B = kBlockSize;
  Share s;
  std::memset(&s, 0, sizeof s);
  s.m_ref = m_ref;
  s.full = no_part();
  s.cut[0] = no_part();
  s.cut[1] = no_part();
  int ncut = 0;
  int32_t full_lo = 0, full_hi = 0;
  for (int32_t b = off / B; b <= (off + Vs - 1) / B; ++b) {
    const int32_t blo = b * B, bhi = std::min(V, blo + B);
    const int32_t lo = std::max(blo, off), hi = std::min(bhi, off + Vs);
    const bool full = lo == blo && hi == bhi;
    double sum = 0;
    bool any = false;
    for (int32_t t = lo; t < hi; ++t)
      if (in[t - off]) {
        sum += std::exp((double)x[t - off] - m_ref);
        any = true;
      }
    if (!any) continue;
    if (full) {
      const double score = m_ref + std::log(sum) + gumbel(q.seed, q.step, pos, (uint32_t)b, kSaltBlock);
      if (s.full.block < 0 || score > s.full.value) {
        s.full.block = b;
        s.full.value = score;
        full_lo = lo;
        full_hi = hi;
      }
    } else {
      BlockPart& p = s.cut[ncut++];
      p.block = b;
      p.value = sum;
      p.win = block_winner(c, x, l, in, lo, hi, q, pos);
    }
  }
  if (s.full.block >= 0) s.full.win = block_winner(c, x, l, in, full_lo, full_hi, q, pos);
  return s;
}

// Global round-0 statistics of a row.
struct Global {
  int32_t n0 = 0;
  int32_t l_id[2] = {-1, -1};
  float l_val[2] = {0, 0};
  int32_t a_id[2] = {-1, -1};
  float a_val[2] = {0, 0};
  double Ml = 0, Zl = 0, Wl = 0, Ma = 0, Za = 0, Wa = 0;
};

void merge_top2(int32_t* ids, float* vals, int32_t id, float v) {
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

Global global_stats(const Ctx& c, int32_t row) {
  Global g;
  for (int32_t r : c.rank_order) {
    const StatsHead& h = c.stats(r, row);
    g.n0 += h.n0;
    for (int k = 0; k < 2; ++k) {
      merge_top2(g.l_id, g.l_val, h.top_l_id[k], h.top_l[k]);
      merge_top2(g.a_id, g.a_val, h.top_a_id[k], h.top_a[k]);
    }
  }
  if (g.n0 == 0) return g;
  g.Ml = g.l_val[0];
  g.Ma = g.a_val[0];
  for (int32_t r : c.rank_order) {
    const StatsHead& h = c.stats(r, row);
    if (h.n0 == 0) continue;
    const double dl = (double)h.top_l[0] - g.Ml, da = (double)h.top_a[0] - g.Ma;
    const double fl = std::exp(dl), fa = std::exp(da);
    g.Zl += h.zl * fl;
    g.Wl += fl * (h.wl + dl * h.zl);
    g.Za += h.za * fa;
    g.Wa += fa * (h.wa + da * h.za);
  }
  return g;
}

// The filtered set K of a row, as a rule every rank applies to its own columns.
struct KRule {
  bool filtered = false;  // non-greedy and some filter active: the KEPT round describes K
  bool cand = false;      // top-k (and top-p) decided on the candidates of round 0
  bool radix = false;     // top-p decided by the radix rounds
  bool has_thr = false;   // order threshold: keep key > vkey, and ties at vkey by the tie rule
  uint32_t vkey = 0;
  bool tie_by_id = true;  // ties kept iff id <= id_thr; else the first tie_keep ties by id
  int32_t id_thr = 0;
  int64_t tie_keep = 0;   // global count of kept ties (radix path)
  bool use_min_p = false;
  double min_p = 0;
  double M = 0;           // global max of a
};

// Radix-select state after the first `rounds_done` radix rounds.
struct RadixState {
  uint32_t prefix = 0;
  int depth = 0;
  double cum = 0;       // mass of the tokens before the prefix's subtree, in order
  int64_t above = 0;    // their count
  bool keep_all = false;
  uint32_t last_count[1] = {0};
};

RadixState radix_walk(const Ctx& c, int32_t row, double target, int rounds_done,
                      int64_t* final_count) {
  RadixState s;
  for (int d = 0; d < rounds_done; ++d) {
    const int32_t round = c.plan.first_radix + d;
    int64_t cnt[kBins] = {};
    double mass[kBins] = {};
    for (int32_t r : c.rank_order) {
      const RadixRec& rr = *reinterpret_cast<const RadixRec*>(c.rec(round, r, row));
      for (int b = 0; b < kBins; ++b) {
        cnt[b] += rr.count[b];
        mass[b] += rr.mass[b];
      }
    }
    int found = -1, last = -1;
    double cum = s.cum, cum_last = s.cum;
    int64_t above = s.above, above_last = s.above;
    for (int b = kBins - 1; b >= 0; --b) {
      if (cnt[b] == 0) continue;
      if (cum + mass[b] >= target) {
        found = b;
        break;
      }
      last = b;
      cum_last = cum;
      above_last = above;
      cum += mass[b];
      above += cnt[b];
    }
    if (found < 0) {
      if (d == 0) {  // no crossing at all (rounding): keep every token
        s.keep_all = true;
        return s;
      }
      // The parent bin crossed but its children do not (the sums were grouped differently):
      // the cut is at the end of the subtree, so descend into its last non-empty bin.
      found = last;
      cum = cum_last;
      above = above_last;
    }
    s.prefix = (s.prefix << 8) | (uint32_t)found;
    s.depth = d + 1;
    s.cum = cum;
    s.above = above;
    if (final_count) *final_count = cnt[found];
  }
  return s;
}

KRule k_rule(const Ctx& c, int32_t row, const Params& q, const Global& g, bool for_kept_round) {
  KRule k;
  if (q.greedy || g.n0 == 0) return k;
  const bool use_k = q.k > 0 && q.k < g.n0;
  const bool use_p = q.p < 1.f;
  const bool use_mp = q.min_p > 0.f;
  if (!use_k && !use_p && !use_mp) return k;
  k.filtered = true;
  k.M = g.Ma;
  k.use_min_p = use_mp;
  k.min_p = (double)q.min_p;
  if ((use_k || use_p) && q.k > 0 && q.k <= c.plan.C) {
    k.cand = true;
    std::vector<Cand> L;
    for (int32_t r : c.rank_order) {
      const StatsHead& h = c.stats(r, row);
      const Cand* cs = c.cands(r, row);
      L.insert(L.end(), cs, cs + std::max(0, std::min(h.n_cand, c.plan.C)));  // clamp: untrusted buffer
    }
    std::sort(L.begin(), L.end(),
              [](const Cand& x, const Cand& y) { return before(x.a, x.id, y.a, y.id); });
    const size_t n1 = std::min<size_t>(use_k ? (size_t)q.k : (size_t)g.n0, L.size());
    size_t n2 = n1;
    if (use_p) {  // docs/sampling.md §3 step 2, on the exact candidate values
      const double m = g.Ma;
      double Z1 = 0;
      for (size_t i = 0; i < n1; ++i) Z1 += std::exp((double)L[i].a - m);
      const double target = (double)q.p * Z1;
      double S = 0;
      for (size_t i = 0; i < n1; ++i) {
        if (i > 0 && !(S < target)) {
          n2 = i;
          break;
        }
        S += std::exp((double)L[i].a - m);
      }
    }
    k.has_thr = n2 > 0;
    if (n2 > 0) {
      k.vkey = order_key(L[n2 - 1].a);
      k.tie_by_id = true;
      k.id_thr = L[n2 - 1].id;
    }
  } else if (use_p) {
    k.radix = true;
    if (!for_kept_round) return k;
    const double target = (double)q.p * g.Za;
    int64_t final_count = 0;
    RadixState s = radix_walk(c, row, target, kRadixRounds, &final_count);
    if (!s.keep_all) {
      const float v = key_value(s.prefix);
      const double e = std::exp((double)v - g.Ma);
      double S = s.cum;
      int64_t j = final_count;
      for (int64_t jj = 1; jj <= final_count; ++jj) {
        S += e;
        if (S >= target) {
          j = jj;
          break;
        }
      }
      k.has_thr = true;
      k.vkey = s.prefix;
      k.tie_by_id = false;
      k.tie_keep = j;
    }
  }
  return k;
}

// This rank's number of kept ties (radix path): the global count minus the ties of the ranks
// with lower offsets, from the last radix round (whose bins are single key values).
int64_t local_tie_keep(const Ctx& c, int32_t row, const KRule& k) {
  int64_t before_me = 0;
  const int32_t last = c.plan.first_radix + kRadixRounds - 1;
  for (int32_t r : c.rank_order) {
    if (r == c.sh.rank) break;
    const RadixRec& rr = *reinterpret_cast<const RadixRec*>(c.rec(last, r, row));
    before_me += rr.count[k.vkey & 255u];
  }
  return std::max<int64_t>(0, k.tie_keep - before_me);
}

// Applies the rule to this rank's slice: in = K ∩ slice.
int32_t apply_rule(const Ctx& c, int32_t row, const KRule& k, const std::vector<float>& x,
                   const std::vector<char>& k0, std::vector<char>* in) {
  const int32_t Vs = c.sh.vocab_slice, off = c.sh.vocab_offset;
  int64_t ties_left = (k.has_thr && !k.tie_by_id) ? local_tie_keep(c, row, k) : 0;
  int32_t n = 0;
  for (int32_t t = 0; t < Vs; ++t) {
    char keep = k0[t];
    if (keep && k.has_thr) {
      const uint32_t key = order_key(x[t]);
      if (key < k.vkey) keep = 0;
      else if (key == k.vkey) {
        if (k.tie_by_id) keep = (off + t) <= k.id_thr;
        else keep = ties_left-- > 0;
      }
    }
    if (keep && k.use_min_p && !(std::exp((double)x[t] - k.M) >= k.min_p)) keep = 0;
    (*in)[t] = keep;
    n += keep;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Partial rounds.
// ---------------------------------------------------------------------------------------------
void partial_stats(const Ctx& c, unsigned char* out) {
  const int32_t Vs = c.sh.vocab_slice, off = c.sh.vocab_offset, C = c.plan.C;
  std::vector<float> l(Vs), x(Vs);
  std::vector<char> k0(Vs);
  std::vector<int32_t> idx;
  for (int32_t i = 0; i < c.a.num_rows; ++i) {
    unsigned char* rowp = out + c.plan.row_bytes[0] * i;
    std::memset(rowp, 0, c.plan.row_bytes[0]);
    StatsHead& h = *reinterpret_cast<StatsHead*>(rowp);
    Cand* cs = reinterpret_cast<Cand*>(rowp + sizeof(StatsHead));
    const Params& q = c.params[c.row_req[i]];
    h.magic = kMagic;
    h.vocab_offset = off;
    h.vocab_slice = Vs;
    h.top_l_id[0] = h.top_l_id[1] = h.top_a_id[0] = h.top_a_id[1] = -1;
    h.n0 = eval_row(c, i, q, &l, &x, &k0);
    for (int32_t t = 0; t < Vs; ++t) {
      if (!k0[t]) continue;
      merge_top2(h.top_l_id, h.top_l, off + t, l[t]);
      merge_top2(h.top_a_id, h.top_a, off + t, x[t]);
    }
    h.share.m_ref = 0;
    h.share.full = no_part();
    h.share.cut[0] = no_part();
    h.share.cut[1] = no_part();
    if (h.n0 == 0) continue;
    const double ml = h.top_l[0], ma = h.top_a[0];
    for (int32_t t = 0; t < Vs; ++t) {
      if (!k0[t]) continue;
      const double el = std::exp((double)l[t] - ml), ea = std::exp((double)x[t] - ma);
      h.zl += el;
      h.wl += el * ((double)l[t] - ml);
      h.za += ea;
      h.wa += ea * ((double)x[t] - ma);
    }
    if (q.greedy) continue;
    h.share = make_share(c, x, l, k0, ma, q, c.pos(i));
    if (q.k > 0 && q.k <= C) {
      idx.clear();
      for (int32_t t = 0; t < Vs; ++t)
        if (k0[t]) idx.push_back(t);
      const size_t take = std::min<size_t>((size_t)C, idx.size());
      std::partial_sort(idx.begin(), idx.begin() + take, idx.end(), [&](int32_t s, int32_t t) {
        return before(x[s], s, x[t], t);
      });
      h.n_cand = (int32_t)take;
      for (size_t e = 0; e < take; ++e) {
        cs[e].a = x[idx[e]];
        cs[e].id = off + idx[e];
      }
    }
  }
}

void partial_radix(const Ctx& c, int32_t round, unsigned char* out) {
  const int32_t Vs = c.sh.vocab_slice;
  const int d = round - c.plan.first_radix;  // bytes already decided
  std::vector<float> l(Vs), x(Vs);
  std::vector<char> k0(Vs);
  for (int32_t i = 0; i < c.a.num_rows; ++i) {
    RadixRec& rr = *reinterpret_cast<RadixRec*>(out + c.plan.row_bytes[round] * i);
    std::memset(&rr, 0, sizeof rr);
    const Params& q = c.params[c.row_req[i]];
    const Global g = global_stats(c, i);
    const KRule k = k_rule(c, i, q, g, false);
    if (!k.radix) continue;
    const double target = (double)q.p * g.Za;
    const RadixState s = radix_walk(c, i, target, d, nullptr);
    if (s.keep_all) continue;
    eval_row(c, i, q, &l, &x, &k0);
    const int shift = 24 - 8 * d;
    for (int32_t t = 0; t < Vs; ++t) {
      if (!k0[t]) continue;
      const uint32_t key = order_key(x[t]);
      if (d > 0 && (key >> (32 - 8 * d)) != s.prefix) continue;
      const uint32_t bin = (key >> shift) & 255u;
      rr.count[bin] += 1;
      rr.mass[bin] += std::exp((double)x[t] - g.Ma);
    }
  }
}

void partial_kept(const Ctx& c, int32_t round, unsigned char* out) {
  const int32_t Vs = c.sh.vocab_slice;
  std::vector<float> l(Vs), x(Vs);
  std::vector<char> k0(Vs), in(Vs);
  for (int32_t i = 0; i < c.a.num_rows; ++i) {
    KeptRec& kr = *reinterpret_cast<KeptRec*>(out + c.plan.row_bytes[round] * i);
    std::memset(&kr, 0, sizeof kr);
    kr.share.full = no_part();
    kr.share.cut[0] = no_part();
    kr.share.cut[1] = no_part();
    const Params& q = c.params[c.row_req[i]];
    const Global g = global_stats(c, i);
    const KRule k = k_rule(c, i, q, g, true);
    if (!k.filtered) continue;
    eval_row(c, i, q, &l, &x, &k0);
    kr.count = apply_rule(c, i, k, x, k0, &in);
    for (int32_t t = 0; t < Vs; ++t) {
      if (!in[t]) continue;
      const double e = std::exp((double)x[t] - k.M);
      kr.z += e;
      kr.w += e * ((double)x[t] - k.M);
    }
    kr.share = make_share(c, x, l, in, k.M, q, c.pos(i));
  }
}

// ---------------------------------------------------------------------------------------------
// Finish.
// ---------------------------------------------------------------------------------------------
struct Pick {
  int32_t block = -1;
  double score = -kInfD;
  Winner win;
};

// Combines the shares of all ranks (one per rank, from `get`) into the winning token.
template <typename GetShare>
Winner combine_shares(const Ctx& c, GetShare get, double M, const Params& q, uint32_t pos) {
  Pick best;
  best.win = no_winner();
  auto consider = [&](int32_t b, double score, const Winner& w) {
    if (best.block < 0 || score > best.score || (score == best.score && b < best.block)) {
      best.block = b;
      best.score = score;
      best.win = w;
    }
  };
  // Cut blocks: sum the parts of each block over the ranks (in offset order).
  struct Acc {
    int32_t block;
    double s;
    Winner w;
  };
  std::vector<Acc> acc;
  for (int32_t r : c.rank_order) {
    const Share& sh = get(r);
    if (sh.full.block >= 0) consider(sh.full.block, sh.full.value, sh.full.win);
    for (const BlockPart& p : sh.cut) {
      if (p.block < 0) continue;
      const double f = sh.m_ref == M ? 1.0 : std::exp(sh.m_ref - M);
      Acc* a = nullptr;
      for (Acc& x : acc)
        if (x.block == p.block) a = &x;
      if (!a) {
        acc.push_back(Acc{p.block, 0.0, no_winner()});
        a = &acc.back();
      }
      a->s += p.value * f;
      if (win_before(p.win, a->w)) a->w = p.win;
    }
  }
  for (const Acc& a : acc) {
    const double score = M + std::log(a.s) + gumbel(q.seed, q.step, pos, (uint32_t)a.block, kSaltBlock);
    consider(a.block, score, a.w);
  }
  return best.win;
}

dds_status finish(const Ctx& c) {
  const dds_sample_args& a = c.a;
  const int32_t Vs = c.sh.vocab_slice, off = c.sh.vocab_offset;
  std::vector<int32_t> status(a.num_requests);
  for (int32_t r = 0; r < a.num_requests; ++r) status[r] = c.params[r].status;
  std::vector<float> l(a.probs ? Vs : 0), x(a.probs ? Vs : 0);
  std::vector<char> k0(a.probs ? Vs : 0), in(a.probs ? Vs : 0);
  for (int32_t i = 0; i < a.num_rows; ++i) {
    const Params& q = c.params[c.row_req[i]];
    const uint32_t pos = c.pos(i);
    const Global g = global_stats(c, i);
    if (g.n0 == 0) {
      status[c.row_req[i]] |= DDS_REQ_EMPTY_ROW;
      if (a.tokens) a.tokens[i] = 0;
      if (a.argmax) a.argmax[i] = 0;
      if (a.logprobs) a.logprobs[i] = -kInf;
      if (a.confidence) a.confidence[i] = 0.f;
      if (a.margin) a.margin[i] = 0.f;
      if (a.entropy) a.entropy[i] = 0.f;
      if (a.probs)
        for (int32_t t = 0; t < Vs; ++t) store(a.probs, a.probs_dtype, (int64_t)i * a.probs_row_stride + t, 0.f);
      continue;
    }
    const int32_t amax = g.l_id[0];
    const KRule k = k_rule(c, i, q, g, true);
    int32_t token;
    Winner w = no_winner();
    if (q.greedy) {
      token = amax;
    } else if (!k.filtered) {
      w = combine_shares(c, [&](int32_t r) -> const Share& { return c.stats(r, i).share; }, g.Ma, q, pos);
      token = w.id;
    } else {
      w = combine_shares(
          c,
          [&](int32_t r) -> const Share& {
            return reinterpret_cast<const KeptRec*>(c.rec(c.plan.kept_round, r, i))->share;
          },
          g.Ma, q, pos);
      token = w.id;
    }
    // §5 statistics.
    double logprob = 0, conf = 1, margin = 1, ent = 0, M = 0, logS = 0;
    bool guided = a.stats == DDS_STATS_GUIDED;
    bool onehot = !guided && q.greedy;
    if (!onehot) {
      double Z, W, x_tok, x2;
      int64_t count;
      if (guided) {
        M = g.Ml;
        Z = g.Zl;
        W = g.Wl;
        count = g.n0;
        x_tok = q.greedy ? (double)g.l_val[0] : (double)w.l;
        x2 = g.l_val[1];
      } else {
        M = g.Ma;
        if (k.filtered) {
          Z = 0;
          W = 0;
          count = 0;
          for (int32_t r : c.rank_order) {
            const KeptRec& kr = *reinterpret_cast<const KeptRec*>(c.rec(c.plan.kept_round, r, i));
            Z += kr.z;
            W += kr.w;
            count += kr.count;
          }
        } else {
          Z = g.Za;
          W = g.Wa;
          count = g.n0;
        }
        x_tok = w.a;
        x2 = g.a_val[1];
      }
      logS = std::log(Z);
      logprob = (x_tok - M) - logS;
      conf = std::exp(-logS);
      const double p2 = count >= 2 ? std::exp((x2 - M) - logS) : 0.0;
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
    if (a.probs) {
      const int64_t base = (int64_t)i * a.probs_row_stride;
      if (onehot) {
        for (int32_t t = 0; t < Vs; ++t) store(a.probs, a.probs_dtype, base + t, off + t == token ? 1.f : 0.f);
        continue;
      }
      eval_row(c, i, q, &l, &x, &k0);
      const std::vector<float>& v = guided ? l : x;
      if (!guided && k.filtered) apply_rule(c, i, k, x, k0, &in);
      else in = k0;
      for (int32_t t = 0; t < Vs; ++t) {
        const float p = in[t] ? (float)std::exp(((double)v[t] - M) - logS) : 0.f;
        store(a.probs, a.probs_dtype, base + t, p);
      }
    }
  }
  if (a.request_status)
    for (int32_t r = 0; r < a.num_requests; ++r) a.request_status[r] = status[r];
  return DDS_OK;
}

// ---------------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------------
template <typename F>
dds_status guarded(const char* fn, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(DDS_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  } catch (...) {
    return fail(DDS_ERR_INTERNAL, "%s: internal error (exception)", fn);
  }
}

struct Busy {
  explicit Busy(dds_sampler* s) : s_(s), ok_(!s->busy.exchange(true)) {}
  ~Busy() {
    if (ok_) s_->busy.store(false);
  }
  dds_sampler* s_;
  bool ok_;
};

enum class Use { Plan, Partial, Finish };

bool aligned(const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

dds_status resolve_stride(const char* fn, const char* name, int64_t* stride, int32_t width) {
  if (*stride == 0) *stride = width;
  if (*stride < width)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->%s (%lld) must be >= shard->vocab_slice (%d) or 0", fn, name,
                (long long)*stride, width);
  return DDS_OK;
}

// Validates and normalises the arguments into c (everything but `gathered`).
dds_status validate(const char* fn, const dds_sampler* s, const dds_sample_args* args,
                    const dds_shard_args* shard, Use use, Ctx* c) {
  if (!s) return fail(DDS_ERR_NULL_POINTER, "%s: sampler is NULL", fn);
  if (!args) return fail(DDS_ERR_NULL_POINTER, "%s: args is NULL", fn);
  if (!shard) return fail(DDS_ERR_NULL_POINTER, "%s: shard is NULL", fn);
  if (args->struct_size < kSampleArgsV1Size)
    return fail(DDS_ERR_STRUCT_SIZE,
                "%s: args->struct_size (%zu) is smaller than sizeof(dds_sample_args) of version 1 "
                "(%zu): call dds_sample_args_init first",
                fn, args->struct_size, kSampleArgsV1Size);
  if (shard->struct_size < sizeof(dds_shard_args))
    return fail(DDS_ERR_STRUCT_SIZE,
                "%s: shard->struct_size (%zu) is smaller than sizeof(dds_shard_args) of version 1 "
                "(%zu): call dds_shard_args_init first",
                fn, shard->struct_size, sizeof(dds_shard_args));
  if (!s->backend->host_readable())
    return fail(DDS_ERR_UNSUPPORTED,
                "%s: vocabulary-parallel sampling is implemented on the CPU backend only; the CUDA "
                "backend does not support it yet",
                fn);
  std::memcpy(&c->a, args, sizeof c->a);
  c->a.struct_size = sizeof c->a;
  std::memcpy(&c->sh, shard, sizeof c->sh);
  c->sh.struct_size = sizeof c->sh;
  dds_sample_args& a = c->a;
  const dds_shard_args& sh = c->sh;
  const int32_t V = s->config.vocab_size;
  c->V = V;
  if (sh.world_size < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->world_size (%d) must be >= 1", fn,
                sh.world_size);
  if (sh.rank < 0 || sh.rank >= sh.world_size)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->rank (%d) must be in [0, world_size = %d)",
                fn, sh.rank, sh.world_size);
  if (sh.vocab_slice < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->vocab_slice (%d) must be >= 1", fn,
                sh.vocab_slice);
  if (sh.vocab_offset < 0 || (int64_t)sh.vocab_offset + sh.vocab_slice > V)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: shard->vocab_offset (%d) + vocab_slice (%d) must lie in [0, vocab_size = %d]",
                fn, sh.vocab_offset, sh.vocab_slice, V);
  if (sh.max_top_k < 0 || sh.max_top_k > DDS_SHARD_MAX_TOP_K)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->max_top_k (%d) must be in [0, %d]", fn,
                sh.max_top_k, DDS_SHARD_MAX_TOP_K);
  if (a.num_rows < 0)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_rows (%d) must be >= 0", fn, a.num_rows);
  if (a.num_rows > s->config.max_rows)
    return fail(DDS_ERR_CAPACITY, "%s: args->num_rows (%d) exceeds the sampler's max_rows (%d)", fn,
                a.num_rows, s->config.max_rows);
  if (!std::isfinite(a.guidance_scale))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->guidance_scale (%g) must be finite", fn,
                (double)a.guidance_scale);
  if (std::isnan(a.temperature) || a.temperature < 0.f || std::isinf(a.temperature))
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->temperature (%g) must be a finite temperature >= 0", fn,
                (double)a.temperature);
  if (a.top_k < 0)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->top_k (%d) must be >= 0 (0 = off)", fn,
                a.top_k);
  if (std::isnan(a.top_p))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->top_p must not be NaN", fn);
  if (std::isnan(a.min_p) || a.min_p < 0.f)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->min_p (%g) must be >= 0 (0 = off)", fn,
                (double)a.min_p);
  c->plan = make_plan(a, sh);
  if (c->plan.num_rounds > DDS_SHARD_MAX_ROUNDS)
    return fail(DDS_ERR_INTERNAL, "%s: plan has too many rounds", fn);
  if (use == Use::Plan || a.num_rows == 0) return DDS_OK;
  if (a.num_requests < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_requests (%d) must be >= 1", fn,
                a.num_requests);
  if (a.num_requests > s->config.max_requests)
    return fail(DDS_ERR_CAPACITY,
                "%s: args->num_requests (%d) exceeds the sampler's max_requests (%d)", fn,
                a.num_requests, s->config.max_requests);
  if (a.num_requests > a.num_rows)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_requests (%d) must be <= num_rows (%d)",
                fn, a.num_requests, a.num_rows);
  if (a.row_offsets == nullptr && a.num_requests != a.num_rows)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->row_offsets is NULL (one row per request) but num_requests (%d) != "
                "num_rows (%d)",
                fn, a.num_requests, a.num_rows);
  if (a.row_offsets) {
    if (a.row_offsets[0] != 0)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->row_offsets[0] (%d) must be 0", fn,
                  a.row_offsets[0]);
    for (int32_t r = 0; r < a.num_requests; ++r)
      if (a.row_offsets[r + 1] < a.row_offsets[r])
        return fail(DDS_ERR_INVALID_ARGUMENT,
                    "%s: args->row_offsets must be non-decreasing: row_offsets[%d] = %d < "
                    "row_offsets[%d] = %d",
                    fn, r + 1, a.row_offsets[r + 1], r, a.row_offsets[r]);
    if (a.row_offsets[a.num_requests] != a.num_rows)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: args->row_offsets[num_requests] (%d) must equal num_rows (%d)", fn,
                  a.row_offsets[a.num_requests], a.num_rows);
  }
  const bool need_logits = use == Use::Partial || a.probs != nullptr;
  if (need_logits && a.logits == nullptr)
    return fail(DDS_ERR_NULL_POINTER, "%s: args->logits is NULL", fn);
  if (!dtype_valid(a.dtype))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->dtype (%d) is not a dds_dtype (0, 1 or 2)", fn,
                a.dtype);
  dds_status st = resolve_stride(fn, "row_stride", &a.row_stride, sh.vocab_slice);
  if (st != DDS_OK) return st;
  if (a.uncond_logits != nullptr) {
    st = resolve_stride(fn, "uncond_row_stride", &a.uncond_row_stride, sh.vocab_slice);
    if (st != DDS_OK) return st;
    if (a.uncond_num_rows < 0)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->uncond_num_rows (%d) must be >= 0", fn,
                  a.uncond_num_rows);
    if (a.uncond_row_offsets == nullptr && a.uncond_num_rows < a.num_rows)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: args->uncond_num_rows (%d) must be >= num_rows (%d) when "
                  "uncond_row_offsets is NULL",
                  fn, a.uncond_num_rows, a.num_rows);
  } else if (a.uncond_row_offsets != nullptr) {
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->uncond_row_offsets is given but args->uncond_logits is NULL", fn);
  }
  if (a.banned_token < -1 || a.banned_token >= V)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->banned_token (%d) must be -1 (none) or in [0, vocab_size = %d)", fn,
                a.banned_token, V);
  if (a.stats != DDS_STATS_PROCESSED && a.stats != DDS_STATS_GUIDED)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->stats (%d) must be DDS_STATS_PROCESSED (0) or DDS_STATS_GUIDED (1)", fn,
                a.stats);
  if (a.probs != nullptr) {
    if (!dtype_valid(a.probs_dtype))
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->probs_dtype (%d) is not a dds_dtype", fn,
                  a.probs_dtype);
    st = resolve_stride(fn, "probs_row_stride", &a.probs_row_stride, sh.vocab_slice);
    if (st != DDS_OK) return st;
  }
  if (use == Use::Finish && !a.tokens && !a.logprobs && !a.argmax && !a.confidence &&
      !a.margin && !a.entropy && !a.probs)
    return fail(DDS_ERR_NULL_POINTER,
                "%s: no output given: set at least one of args->tokens, logprobs, argmax, "
                "confidence, margin, entropy, probs",
                fn);
  struct P {
    const char* name;
    const void* p;
    size_t align;
  };
  const P ptrs[] = {{"row_offsets", a.row_offsets, 4},
                    {"positions", a.positions, 4},
                    {"logits", a.logits, dtype_size(a.dtype)},
                    {"uncond_logits", a.uncond_logits, dtype_size(a.dtype)},
                    {"uncond_row_offsets", a.uncond_row_offsets, 4},
                    {"guidance_scales", a.guidance_scales, 4},
                    {"temperatures", a.temperatures, 4},
                    {"top_ks", a.top_ks, 4},
                    {"top_ps", a.top_ps, 4},
                    {"min_ps", a.min_ps, 4},
                    {"seeds", a.seeds, 8},
                    {"steps", a.steps, 4},
                    {"tokens", a.tokens, 4},
                    {"logprobs", a.logprobs, 4},
                    {"argmax", a.argmax, 4},
                    {"confidence", a.confidence, 4},
                    {"margin", a.margin, 4},
                    {"entropy", a.entropy, 4},
                    {"probs", a.probs, a.probs ? dtype_size(a.probs_dtype) : 1},
                    {"request_status", a.request_status, 4}};
  for (const P& p : ptrs)
    if (p.p && !aligned(p.p, p.align))
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->%s (%p) must be aligned to %zu bytes", fn,
                  p.name, p.p, p.align);
  // The top-k cap (host-readable arrays on the CPU backend).
  auto bad_k = [&](int32_t k) { return k > 0 && k > sh.max_top_k && k < V; };
  if (bad_k(a.top_k))
    return fail(DDS_ERR_UNSUPPORTED,
                "%s: args->top_k (%d) exceeds shard->max_top_k (%d): vocabulary-parallel top-k "
                "needs k <= max_top_k (at most %d) or k >= vocab_size (off)",
                fn, a.top_k, sh.max_top_k, DDS_SHARD_MAX_TOP_K);
  if (a.top_ks)
    for (int32_t r = 0; r < a.num_requests; ++r)
      if (bad_k(a.top_ks[r]))
        return fail(DDS_ERR_UNSUPPORTED,
                    "%s: args->top_ks[%d] (request %d) = %d exceeds shard->max_top_k (%d): "
                    "vocabulary-parallel top-k needs k <= max_top_k (at most %d) or k >= "
                    "vocab_size (off)",
                    fn, r, r, a.top_ks[r], sh.max_top_k, DDS_SHARD_MAX_TOP_K);
  if (use == Use::Partial && (sh.round < 0 || sh.round >= c->plan.num_rounds))
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: shard->round (%d) must be in [0, num_rounds = %d) (see dds_sample_shard_plan)",
                fn, sh.round, c->plan.num_rounds);
  c->setup();
  return DDS_OK;
}

// Checks the round-0 headers of every rank (magic, slices partitioning [0, V)) and sets
// rank_order.
dds_status check_gathered(const char* fn, Ctx* c) {
  if (c->gathered == nullptr)
    return fail(DDS_ERR_NULL_POINTER, "%s: gathered is NULL (it must hold the all-gathered "
                "records of the earlier rounds)", fn);
  if (!aligned(c->gathered, 8))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: gathered (%p) must be aligned to 8 bytes", fn,
                (const void*)c->gathered);
  const int32_t R = c->sh.world_size;
  std::vector<std::pair<int32_t, int32_t>> sl(R);
  for (int32_t r = 0; r < R; ++r) {
    const StatsHead& h = c->stats(r, 0);
    if (h.magic != kMagic)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: gathered: rank %d's round-0 record of row 0 has no dds record header "
                  "(magic 0x%08x): the buffer is not the all-gather of dds_sample_partial round 0 "
                  "laid out as dds_sample_shard_plan says",
                  fn, r, h.magic);
    for (int32_t i = 1; i < c->a.num_rows; ++i) {
      const StatsHead& hi = c->stats(r, i);
      if (hi.magic != kMagic || hi.vocab_offset != h.vocab_offset ||
          hi.vocab_slice != h.vocab_slice)
        return fail(DDS_ERR_INVALID_ARGUMENT,
                    "%s: gathered: rank %d's round-0 record of row %d does not match its row 0 "
                    "(wrong layout or num_rows)",
                    fn, r, i);
    }
    sl[r] = {h.vocab_offset, h.vocab_slice};
  }
  if (sl[c->sh.rank].first != c->sh.vocab_offset || sl[c->sh.rank].second != c->sh.vocab_slice)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: gathered: the record of rank %d (this rank) has slice [%d, +%d) but shard "
                "says [%d, +%d)",
                fn, c->sh.rank, sl[c->sh.rank].first, sl[c->sh.rank].second, c->sh.vocab_offset,
                c->sh.vocab_slice);
  c->rank_order.resize(R);
  for (int32_t r = 0; r < R; ++r) c->rank_order[r] = r;
  std::sort(c->rank_order.begin(), c->rank_order.end(),
            [&](int32_t x, int32_t y) { return sl[x].first < sl[y].first; });
  int64_t next = 0;
  for (int32_t r : c->rank_order) {
    if (sl[r].first != next)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: the ranks' slices must partition [0, vocab_size = %d): rank %d starts at "
                  "%d, expected %lld",
                  fn, c->V, r, sl[r].first, (long long)next);
    next += sl[r].second;
  }
  if (next != c->V)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: the ranks' slices must partition [0, vocab_size = %d): they end at %lld", fn,
                c->V, (long long)next);
  return DDS_OK;
}

}  // namespace
}  // namespace dds

using dds::fail;

extern "C" {

DDS_API dds_status dds_shard_args_init(dds_shard_args* shard, size_t struct_size) {
  dds::clear_error();
  if (!shard) return fail(DDS_ERR_NULL_POINTER, "dds_shard_args_init: shard is NULL");
  if (struct_size < sizeof(dds_shard_args))
    return fail(DDS_ERR_STRUCT_SIZE,
                "dds_shard_args_init: struct_size (%zu) is smaller than sizeof(dds_shard_args) of "
                "version 1 (%zu)",
                struct_size, sizeof(dds_shard_args));
  std::memset(shard, 0, struct_size);
  shard->struct_size = struct_size;
  shard->rank = 0;
  shard->world_size = 1;
  shard->vocab_offset = 0;
  shard->vocab_slice = 0;
  shard->max_top_k = 64;
  shard->round = 0;
  return DDS_OK;
}

DDS_API dds_status dds_sample_shard_plan(const dds_sampler* sampler, const dds_sample_args* args,
                                         const dds_shard_args* shard, dds_shard_plan* plan) {
  dds::clear_error();
  const char* fn = "dds_sample_shard_plan";
  return dds::guarded(fn, [&]() -> dds_status {
    if (!plan) return fail(DDS_ERR_NULL_POINTER, "%s: plan is NULL", fn);
    if (plan->struct_size < sizeof(dds_shard_plan))
      return fail(DDS_ERR_STRUCT_SIZE,
                  "%s: plan->struct_size (%zu) must be set to sizeof(dds_shard_plan) (%zu)", fn,
                  plan->struct_size, sizeof(dds_shard_plan));
    dds::Ctx c;
    dds_status st = dds::validate(fn, sampler, args, shard, dds::Use::Plan, &c);
    if (st != DDS_OK) return st;
    const size_t sz = plan->struct_size;
    std::memset(plan, 0, sizeof(dds_shard_plan));
    plan->struct_size = sz;
    plan->num_rounds = c.plan.num_rounds;
    plan->world_size = c.sh.world_size;
    for (int32_t q = 0; q < c.plan.num_rounds; ++q) {
      plan->round_kind[q] = c.plan.kind[q];
      plan->row_bytes[q] = c.plan.row_bytes[q];
      plan->record_bytes[q] = c.plan.record_bytes[q];
      plan->gathered_offset[q] = c.plan.offset[q];
    }
    plan->gathered_bytes = c.plan.total;
    return DDS_OK;
  });
}

DDS_API dds_status dds_sample_record_bytes(const dds_sampler* sampler,
                                           const dds_sample_args* args,
                                           const dds_shard_args* shard, int32_t round,
                                           size_t* bytes) {
  dds::clear_error();
  const char* fn = "dds_sample_record_bytes";
  return dds::guarded(fn, [&]() -> dds_status {
    if (!bytes) return fail(DDS_ERR_NULL_POINTER, "%s: bytes is NULL", fn);
    dds::Ctx c;
    dds_status st = dds::validate(fn, sampler, args, shard, dds::Use::Plan, &c);
    if (st != DDS_OK) return st;
    if (round < 0 || round >= c.plan.num_rounds)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: round (%d) must be in [0, num_rounds = %d)", fn,
                  round, c.plan.num_rounds);
    *bytes = (size_t)c.plan.record_bytes[round];
    return DDS_OK;
  });
}

DDS_API dds_status dds_sample_partial(dds_sampler* sampler, const dds_sample_args* args,
                                      const dds_shard_args* shard, const void* gathered,
                                      void* record_out, dds_stream) {
  dds::clear_error();
  const char* fn = "dds_sample_partial";
  return dds::guarded(fn, [&]() -> dds_status {
    if (!sampler) return fail(DDS_ERR_NULL_POINTER, "%s: sampler is NULL", fn);
    dds::Busy busy(sampler);
    if (!busy.ok_) return fail(DDS_ERR_BUSY, "%s: sampler is in use by another thread", fn);
    dds::Ctx c;
    dds_status st = dds::validate(fn, sampler, args, shard, dds::Use::Partial, &c);
    if (st != DDS_OK || c.a.num_rows == 0) return st;
    if (!record_out) return fail(DDS_ERR_NULL_POINTER, "%s: record_out is NULL", fn);
    if (!dds::aligned(record_out, 8))
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: record_out (%p) must be aligned to 8 bytes", fn,
                  record_out);
    const int32_t q = c.sh.round;
    unsigned char* out = static_cast<unsigned char*>(record_out);
    if (q == 0) {
      dds::partial_stats(c, out);
      return DDS_OK;
    }
    c.gathered = static_cast<const unsigned char*>(gathered);
    if ((st = dds::check_gathered(fn, &c)) != DDS_OK) return st;
    if (c.plan.kind[q] == DDS_SHARD_ROUND_RADIX)
      dds::partial_radix(c, q, out);
    else
      dds::partial_kept(c, q, out);
    return DDS_OK;
  });
}

DDS_API dds_status dds_sample_finish(dds_sampler* sampler, const dds_sample_args* args,
                                     const dds_shard_args* shard, const void* gathered,
                                     dds_stream) {
  dds::clear_error();
  const char* fn = "dds_sample_finish";
  return dds::guarded(fn, [&]() -> dds_status {
    if (!sampler) return fail(DDS_ERR_NULL_POINTER, "%s: sampler is NULL", fn);
    dds::Busy busy(sampler);
    if (!busy.ok_) return fail(DDS_ERR_BUSY, "%s: sampler is in use by another thread", fn);
    dds::Ctx c;
    dds_status st = dds::validate(fn, sampler, args, shard, dds::Use::Finish, &c);
    if (st != DDS_OK || c.a.num_rows == 0) return st;
    c.gathered = static_cast<const unsigned char*>(gathered);
    if ((st = dds::check_gathered(fn, &c)) != DDS_OK) return st;
    return dds::finish(c);
  });
}

}  // extern "C"
