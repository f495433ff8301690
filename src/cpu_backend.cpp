// The CPU backend: the reference implementation of docs/sampling.md and the oracle of the GPU
// kernels (docs/cpu_backend.md): one dtype dispatch per row, then fp32 row loops that vectorise;
// per 1024-column block the maximum, sum-exp and entropy term in fp32 vector lanes (cpu_vec.h),
// from which come the block scores (float64) and every statistic; the winning block's Gumbels in
// float64, evaluated only for tokens that can win (cpu_two_level.h); scratch grown by the calls
// that need it; rows spread over a small persistent pool of threads (cpu_pool.h).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "allowed.h"
#include "cpu_pool.h"
#include "cpu_row.h"
#include "cpu_two_level.h"
#include "cpu_vec.h"
#include "dtype.h"
#include "internal.h"
#include "offsets.h"
#include "outputs.h"
#include "rng.h"

namespace dds {
namespace {

using cpu::kInf;
using cpu::RequestParams;
constexpr double kInfD = std::numeric_limits<double>::infinity();

// A part of a call gets at least this many logits elements: below it, waking a worker costs more
// than the part saves.
constexpr int64_t kMinElementsPerPart = 32768;

// Per-participant scratch, sized at dds_create (nothing in a call allocates).
struct Scratch {
  std::vector<float> l, x, u, w;  // guided logits, tempered, uncond / converted row, kept values
  std::vector<char> keep;
  std::vector<int32_t> order;
  std::vector<uint64_t> keys, keys_tmp;  // filter: sort keys
  std::vector<float> bm, be;  // per block: maximum, entropy term (cpu_vec.h)
  std::vector<double> bs;     // per block: sum-exp
  std::vector<float> sorted;  // stash: finite values ascending, for ranks
  explicit Scratch(int32_t V)
      : l(V), x(V), u(V), w(V), keep(V), bm((V - 1) / kBlockSize + 1),
        bs((V - 1) / kBlockSize + 1), be((V - 1) / kBlockSize + 1) {
    order.reserve(V);
    keys.reserve(V);
    keys_tmp.reserve(V);
    sorted.reserve(V);
  }
};

// The two highest columns of w over w > -inf in the order (value desc, id asc): first = the
// lowest id of the maximum; v2 = the largest value among the other columns (-inf if none).
struct TopTwo {
  int32_t first = -1;
  float v1 = -kInf, v2 = -kInf;
};

// max of w[lo, hi) (NaN-free), in 16 independent lanes so that it vectorises.
inline float range_max(const float* w, int32_t lo, int32_t hi) {
  constexpr int kL = 16;
  float acc[kL];
  for (int j = 0; j < kL; ++j) acc[j] = -kInf;
  int32_t t = lo;
  for (; t + kL <= hi; t += kL)
    for (int j = 0; j < kL; ++j) acc[j] = w[t + j] > acc[j] ? w[t + j] : acc[j];
  float m = -kInf;
  for (; t < hi; ++t) m = w[t] > m ? w[t] : m;
  for (int j = 0; j < kL; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

TopTwo top_two(const float* w, int32_t V) {
  TopTwo r;
  r.v1 = range_max(w, 0, V);
  if (!(r.v1 > -kInf)) return r;
  int32_t f = 0;
  while (!(w[f] == r.v1)) ++f;
  r.first = f;
  r.v2 = std::max(range_max(w, 0, f), range_max(w, f + 1, V));
  return r;
}

// Z = sum over w > -inf of exp((double)w - M) in column order (the stash's normaliser).
double exp_sum(const float* w, int32_t V, double M) {
  double Z = 0;
  for (int32_t t = 0; t < V; ++t)
    if (w[t] > -kInf) Z += std::exp((double)w[t] - M);
  return Z;
}

// Where a row's probabilities go; 16-bit rows go through an fp32 staging row (each value is the
// fp32 probability rounded to the dtype).
struct ProbsOut {
  void* base = nullptr;
  int32_t dtype = DDS_DTYPE_F32;
  int64_t offset = 0;
};

struct RowStats {
  double logprob = -kInfD, confidence = 0, margin = 0, entropy = 0;
};

// The block terms of a row (cpu_vec.h): per block its maximum bm (-inf: no kept column),
// sum-exp bs and entropy term be, all relative to bm.
struct BlockTerms {
  int32_t nb;
  const float* bm;
  const double* bs;
  const float* be;
};

// Statistics of softmax(w) over w > -inf (§5) from its block terms (be needed for the entropy),
// M = the maximum: Z = sum_b bs exp(bm - M) and E = sum_b exp(bm - M) (bs (bm - M) + be) in
// float64 in block order, entropy = log Z - E / Z; probabilities in fp32 lanes when asked.
void distribution_stats(const float* w, int32_t V, const TopTwo& tt, int32_t token,
                        const BlockTerms& bt, bool want_entropy, const ProbsOut& po,
                        float* staging, RowStats* st) {
  const double M = (double)tt.v1;
  double Z = 0, E = 0;
  for (int32_t b = 0; b < bt.nb; ++b) {
    if (!(bt.bm[b] > -kInf)) continue;
    const double dm = (double)bt.bm[b] - M;
    const double f = std::exp(dm);
    Z += bt.bs[b] * f;
    if (want_entropy) E += f * (dm * bt.bs[b] + (double)bt.be[b]);
  }
  // log-probabilities as (x - M) - log Z, not x - (M + log Z): with M near FLT_MAX (the +inf
  // rule) M + log Z rounds back to M in float64 and every top token got probability 1.
  const double logS = std::log(Z);
  if (want_entropy) st->entropy = std::max(0.0, logS - E / Z);
  if (po.base) {
    float* out = po.dtype == DDS_DTYPE_F32 ? static_cast<float*>(po.base) + po.offset : staging;
    cpu::softmax_probs(w, V, tt.v1, logS, out);
    if (po.dtype == DDS_DTYPE_BF16) {
      uint16_t* d = static_cast<uint16_t*>(po.base) + po.offset;
      for (int32_t t = 0; t < V; ++t) d[t] = f32_to_bf16(staging[t]);
    } else if (po.dtype == DDS_DTYPE_F16) {
      uint16_t* d = static_cast<uint16_t*>(po.base) + po.offset;
      for (int32_t t = 0; t < V; ++t) d[t] = f32_to_f16(staging[t]);
    }
  }
  const double p1 = std::exp(-logS);
  const double p2 = tt.v2 > -kInf ? std::exp(((double)tt.v2 - M) - logS) : 0.0;
  st->confidence = p1;
  st->margin = p1 - p2;
  st->logprob = ((double)w[token] - M) - logS;
}

void store_probs_value(const ProbsOut& po, int32_t t, float v) {
  switch (po.dtype) {
    case DDS_DTYPE_F32: static_cast<float*>(po.base)[po.offset + t] = v; break;
    case DDS_DTYPE_BF16: static_cast<uint16_t*>(po.base)[po.offset + t] = f32_to_bf16(v); break;
    default: static_cast<uint16_t*>(po.base)[po.offset + t] = f32_to_f16(v); break;
  }
}

void fill_probs_zero(const ProbsOut& po, int32_t V) {
  if (po.dtype == DDS_DTYPE_F32)
    std::fill_n(static_cast<float*>(po.base) + po.offset, V, 0.f);
  else
    std::fill_n(static_cast<uint16_t*>(po.base) + po.offset, V, (uint16_t)0);  // +0 in bf16 / f16
}

// The sort key of column t: the value's bits made order-preserving and descending (-0 as +0)
// above the id, so that ascending keys are (x desc, id asc) and sorts compare integers only.
inline uint64_t sort_key(float x, int32_t t) {
  return ((uint64_t)~row::order_key(x) << 32) | (uint32_t)t;  // (order_key: ascending in x)
}

// Sorts keys[0, n), made in ascending id order, ascending: a stable LSD radix sort on the value
// half (3 passes of 11 bits, a pass skipped when every key has the same digit) keeps the ids of
// equal values in order; tmp holds n keys.
void sort_keys(uint64_t* keys, size_t n, uint64_t* tmp) {
  if (n < 256) {
    std::sort(keys, keys + n);
    return;
  }
  uint64_t* src = keys;
  uint64_t* dst = tmp;
  for (int shift = 32; shift < 64; shift += 11) {
    uint32_t count[2048] = {};
    for (size_t k = 0; k < n; ++k) ++count[(src[k] >> shift) & 2047u];
    if (count[(src[0] >> shift) & 2047u] == n) continue;  // one digit: nothing to move
    uint32_t sum = 0;
    for (uint32_t& c : count) {
      const uint32_t c0 = c;
      c = sum;
      sum += c0;
    }
    for (size_t k = 0; k < n; ++k) dst[count[(src[k] >> shift) & 2047u]++] = src[k];
    std::swap(src, dst);
  }
  if (src != keys) std::memcpy(keys, src, n * sizeof(uint64_t));
}

// §3: top-k, top-p, min-p on x over k0 (x > -inf there); result in keep.
void filter(const float* x, const float* l, int32_t V, int32_t n0, const RequestParams& q,
            char* keep, std::vector<int32_t>* order, std::vector<uint64_t>* keys,
            std::vector<uint64_t>* tmp) {
  for (int32_t t = 0; t < V; ++t) keep[t] = l[t] > -kInf;
  const bool use_k = q.k > 0 && q.k < n0;
  const bool use_p = q.p < 1.f;
  const bool use_min_p = q.min_p > 0.f;
  if (!use_k && !use_p && !use_min_p) return;
  double m = -kInfD;
  for (int32_t t = 0; t < V; ++t)
    if (l[t] > -kInf) m = std::max(m, (double)x[t]);
  if (use_k || use_p) {
    // The kept columns' keys in id order (capacities V reserved at dds_create).
    keys->clear();
    for (int32_t t = 0; t < V; ++t)
      if (l[t] > -kInf) keys->push_back(sort_key(x[t], t));
    tmp->resize(keys->size());
    size_t n = keys->size();
    if (use_k) {  // the k first keys, sorted; the rest dropped
      std::partial_sort(keys->begin(), keys->begin() + q.k, keys->end());
      for (size_t idx = q.k; idx < n; ++idx) keep[(uint32_t)(*keys)[idx]] = 0;
      n = q.k;
    } else {
      sort_keys(keys->data(), n, tmp->data());
    }
    order->resize(n);
    for (size_t idx = 0; idx < n; ++idx) (*order)[idx] = (int32_t)(uint32_t)(*keys)[idx];
    if (use_p) {
      double Z1 = 0;
      for (int32_t t : *order) Z1 += std::exp((double)x[t] - m);
      const double target = (double)q.p * Z1;
      // S only grows, so once it reaches the target every later column is dropped.
      double S = 0;
      size_t idx = 0;
      for (; idx < order->size(); ++idx) {
        if (idx > 0 && !(S < target)) break;
        S += std::exp((double)x[(*order)[idx]] - m);
      }
      for (; idx < order->size(); ++idx) keep[(*order)[idx]] = 0;
    }
  }
  if (use_min_p) {
    // The rule is exp(x - m) >= min_p in float64; a column 1e-6 or more away from the boundary in
    // the log domain is decided without its exp (exp is monotone and far more accurate than that).
    const double log_min_p = std::log((double)q.min_p);
    for (int32_t t = 0; t < V; ++t) {
      if (!keep[t]) continue;
      const double d = (double)x[t] - m;
      if (d > log_min_p + 1e-6) continue;
      if (d < log_min_p - 1e-6 || !(std::exp(d) >= (double)q.min_p)) keep[t] = 0;
    }
  }
}

// One dds_sample call as seen by the parts running it.
struct SampleCall {
  const dds_sample_args* a;
  int32_t V;
  const RequestParams* params;  // [num_requests]
  const int32_t* row_request;   // [num_rows]
  char* row_empty;              // [num_rows]
  Scratch* scratch;             // [parts]
  int parts;
};

void write_empty_row(const dds_sample_args& a, int32_t V, int32_t i) {
  outputs_of(a).write_empty(i);
  if (a.probs) fill_probs_zero({a.probs, a.probs_dtype, (int64_t)i * a.probs_row_stride}, V);
}

// One row of dds_sample (docs/sampling.md §2-§5). Returns false for an empty row.
bool sample_row(const dds_sample_args& a, int32_t V, const RequestParams& q, int32_t r, int32_t i,
                int32_t j, Scratch& s) {
  float* l = s.l.data();
  // §2: guidance, ban, sanitisation (one dtype dispatch per row, then fp32 loops).
  const float* c = cpu::row_as_f32(a.logits, a.dtype, (int64_t)i * a.row_stride, V, s.x.data());
  if (q.guided) {
    const float* u = cpu::row_as_f32(a.uncond_logits, a.dtype,
                                     (q.uncond_first + j) * a.uncond_row_stride, V, s.u.data());
    for (int32_t t = 0; t < V; ++t) l[t] = cpu::row_logit(c[t], u[t], q.g, true);
  } else {
    for (int32_t t = 0; t < V; ++t) l[t] = cpu::row_logit(c[t], 0.f, 0.f, false);
  }
  if (a.banned_token >= 0 && a.banned_token < V) l[a.banned_token] = -kInf;
  if (const int32_t* mask = allowed_row(a.allowed_token_masks, a.allowed_mask_stride, r))
    for (int32_t t = 0; t < V; ++t)
      if (!allowed(mask, t)) l[t] = -kInf;
  int32_t n0 = 0;
  for (int32_t t = 0; t < V; ++t) n0 += l[t] > -kInf;
  if (n0 == 0) return false;
  const TopTwo tl = top_two(l, V);
  const int32_t amax = tl.first;

  const bool want_stats = a.logprobs || a.confidence || a.margin || a.entropy || a.probs;
  const bool want_entropy = a.entropy != nullptr;
  const ProbsOut po{a.probs, a.probs_dtype, (int64_t)i * a.probs_row_stride};
  const uint32_t pos = (uint32_t)(a.positions ? a.positions[i] : j);
  RowStats st;
  int32_t token;
  if (q.greedy) {
    token = amax;
  } else {
    // §3 temperature and filters: w = the tempered value on kept columns, -inf elsewhere.
    float* x = s.x.data();
    float* w = s.w.data();
    for (int32_t t = 0; t < V; ++t) x[t] = cpu::temper(l[t], q.invT);
    const bool filtered = (q.k > 0 && q.k < n0) || q.p < 1.f || q.min_p > 0.f;
    if (filtered) {
      filter(x, l, V, n0, q, s.keep.data(), &s.order, &s.keys, &s.keys_tmp);
      for (int32_t t = 0; t < V; ++t) w[t] = s.keep[t] ? x[t] : -kInf;
    } else {
      w = x;  // every column of K0 is kept, and x > -inf exactly there
    }
    // §4: the block terms (the entropy term only for the processed entropy), then the block
    // scores lse_b = bm + log(bs) in float64. Unfiltered, the top two values of x are those of l
    // tempered (temper is monotone; only the values are used).
    TopTwo tw;
    if (filtered) {
      tw = top_two(w, V);
    } else {
      tw.v1 = cpu::temper(tl.v1, q.invT);
      tw.v2 = cpu::temper(tl.v2, q.invT);
    }
    const bool processed_stats = want_stats && a.stats != DDS_STATS_GUIDED;
    const BlockTerms bt{(V - 1) / kBlockSize + 1, s.bm.data(), s.bs.data(), s.be.data()};
    cpu::block_terms(w, V, s.bm.data(), s.bs.data(),
                     processed_stats && want_entropy ? s.be.data() : nullptr);
    const int32_t b = pick_block(
        bt.nb,
        [&](int32_t bb, double* lse) {
          if (!(bt.bm[bb] > -kInf)) return false;
          *lse = (double)bt.bm[bb] + std::log(bt.bs[bb]);
          return true;
        },
        q.seed, q.step, pos, kSaltBlock);
    const int32_t lo = b * kBlockSize, hi = std::min(V, lo + kBlockSize);
    token = b < 0 ? 0 : pick_token(lo, hi, [&](int32_t t) { return (double)w[t]; }, q.seed,
                                   q.step, pos, kSaltToken);
    if (processed_stats && b >= 0)
      distribution_stats(w, V, tw, token, bt, want_entropy, po, s.u.data(), &st);
  }
  // §5 statistics of the guided distribution, or of the greedy one.
  if (want_stats && a.stats == DDS_STATS_GUIDED) {
    cpu::block_terms(l, V, s.bm.data(), s.bs.data(), want_entropy ? s.be.data() : nullptr);
    const BlockTerms bt{(V - 1) / kBlockSize + 1, s.bm.data(), s.bs.data(), s.be.data()};
    distribution_stats(l, V, tl, token, bt, want_entropy, po, s.u.data(), &st);
  } else if (want_stats && q.greedy) {
    st.logprob = 0;
    st.confidence = 1;
    st.margin = 1;
    st.entropy = 0;
    if (a.probs) {
      fill_probs_zero(po, V);
      store_probs_value(po, token, 1.f);
    }
  }
  outputs_of(a).write(i, token, amax, st.logprob, st.confidence, st.margin, st.entropy);
  return true;
}

void sample_part(void* ctx, int part) {
  const SampleCall& c = *static_cast<const SampleCall*>(ctx);
  const dds_sample_args& a = *c.a;
  const int64_t n = a.num_rows;
  const int32_t begin = (int32_t)(n * part / c.parts), end = (int32_t)(n * (part + 1) / c.parts);
  for (int32_t i = begin; i < end; ++i) {
    const int32_t r = c.row_request[i];
    // An orphan row (its request's offsets are flagged) is keyed by its index in the call.
    const int32_t j = (c.params[r].status & DDS_REQ_BAD_ROW_OFFSETS) != 0
                          ? i
                          : i - (a.row_offsets ? a.row_offsets[r] : r);
    c.row_empty[i] = !sample_row(a, c.V, c.params[r], r, i, j, c.scratch[part]);
    if (c.row_empty[i]) write_empty_row(a, c.V, i);
  }
}

// The number of participants of a pool when the config asks for `requested` (0 = default).
int pool_threads(int32_t requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return (int)std::max(1u, std::min(hw, 8u));
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const dds_sampler_config& cfg)
      : cfg_(cfg), pool_(pool_threads(cfg.num_threads)) {
    // Scratch is allocated by the first call that needs it (per-request and per-row arrays grown
    // to the largest call so far, the per-thread rows of V values once), then reused: calls
    // allocate nothing once a sampler has served its largest shape, and a sampler declared with
    // large capacities holds no memory it never uses.
    scratch_.reserve(pool_.threads());
  }

  dds_status sample(const dds_sample_args& a, dds_stream) override {
    const int32_t V = cfg_.vocab_size;
    ensure_scratch();
    if (params_.size() < (size_t)a.num_requests) params_.resize((size_t)a.num_requests);
    if (row_request_.size() < (size_t)a.num_rows) {
      row_request_.resize((size_t)a.num_rows);
      row_empty_.resize((size_t)a.num_rows);
    }
    // The row_offsets rule (kernels/common/offsets.h): row i is request find(i)'s; a request
    // whose offsets are flagged owns none (its rows are orphans: unguided, keyed by i).
    for (int32_t r = 0; r < a.num_requests; ++r) {
      const int32_t row_begin = a.row_offsets ? a.row_offsets[r] : r;
      const int32_t row_end = a.row_offsets ? a.row_offsets[r + 1] : r + 1;
      const bool ok = offsets::good(row_begin, row_end, r, a.num_requests, a.num_rows);
      params_[r] = cpu::request_params(a, r, ok ? row_end - row_begin : -1);
      if (!ok) params_[r].status |= DDS_REQ_BAD_ROW_OFFSETS;
    }
    for (int32_t i = 0; i < a.num_rows; ++i)
      row_request_[i] = offsets::find(a.row_offsets, a.num_requests, i);
    const int64_t elements = (int64_t)a.num_rows * V;
    const int parts = (int)std::max<int64_t>(
        1, std::min<int64_t>({pool_.threads(), a.num_rows, elements / kMinElementsPerPart}));
    SampleCall call{&a, V, params_.data(), row_request_.data(), row_empty_.data(),
                    scratch_.data(), parts};
    pool_.run(parts, sample_part, &call);
    if (a.request_status) {
      // DDS_REQ_EMPTY_ROW of row i on request find(i) (an orphan row's: on its flagged request).
      for (int32_t r = 0; r < a.num_requests; ++r) a.request_status[r] = params_[r].status;
      for (int32_t i = 0; i < a.num_rows; ++i)
        if (row_empty_[i]) a.request_status[row_request_[i]] |= DDS_REQ_EMPTY_ROW;
    }
    return DDS_OK;
  }

  dds_status stash(const dds_stash_args& a, dds_stream) override {
    const int32_t V = cfg_.vocab_size;
    const int32_t n = a.num_top;
    const int32_t E = n + 1;
    if (a.request_status)
      std::fill(a.request_status, a.request_status + a.num_requests, 0);
    ensure_scratch();
    Scratch& s = scratch_[0];
    float* v = s.l.data();
    std::vector<float>& sorted = s.sorted;  // finite values ascending, for ranks
    std::vector<int32_t>& idx = s.order;
    for (int32_t r = 0; r < a.num_requests; ++r) {
      if (a.keep && a.keep[r] == 0) continue;
      int32_t status = 0;
      const int32_t row_begin = a.row_offsets ? a.row_offsets[r] : r;
      const int32_t row_end = a.row_offsets ? a.row_offsets[r + 1] : r + 1;
      const int32_t slot = a.slots ? a.slots[r] : r;
      // The row_offsets rule (kernels/common/offsets.h): a flagged request owns no rows; a good
      // one owns [own_lo, own_hi), all of [row_begin, row_end) unless another request's search
      // takes some of it (invalid offsets elsewhere).
      const bool rows_ok = offsets::good(row_begin, row_end, r, a.num_requests, a.num_rows);
      const bool slot_ok = slot >= 0 && slot < a.num_slots;
      if (!rows_ok || !slot_ok) {  // skipped: the reasons flagged, nothing else read
        if (a.request_status)
          a.request_status[r] =
              (rows_ok ? 0 : DDS_REQ_BAD_ROW_OFFSETS) | (slot_ok ? 0 : DDS_REQ_BAD_SLOT);
        continue;
      }
      int32_t own_lo, own_hi;
      offsets::rows_of(a.row_offsets, a.num_requests, a.num_rows, r, &own_lo, &own_hi);
      int32_t nvalid = a.num_valid ? a.num_valid[r] : row_end - row_begin;
      nvalid = std::max(0, std::min({nvalid, row_end - row_begin, a.rows_per_slot}));
      float T = rule::temperature(a.temperatures ? a.temperatures[r] : a.temperature, &status).T;
      if (T == 0.f) T = 1.f;
      float invT = 1.0f / T;
      if (std::isinf(invT)) invT = 1.f;  // T subnormal: treated as T = 1 like T = 0
      int32_t n_ids = 0;
      if (a.token_ids) {
        n_ids = a.num_token_ids ? a.num_token_ids[r] : n;
        if (n_ids < 0 || n_ids > n) status |= DDS_REQ_BAD_NUM_TOKEN_IDS;
        n_ids = std::max(0, std::min(n_ids, n));
        for (int32_t e = 0; e < n_ids; ++e) {
          const int32_t t = a.token_ids[(int64_t)r * n + e];
          if (t < 0 || t >= V) status |= DDS_REQ_BAD_TOKEN_ID;
        }
      }
      const int32_t* mask = allowed_row(a.allowed_token_masks, a.allowed_mask_stride, r);
      for (int32_t j = own_lo - row_begin; j < std::min(nvalid, own_hi - row_begin); ++j) {
        const int32_t i = row_begin + j;
        if (a.committed_tokens && (a.committed_tokens[i] < 0 || a.committed_tokens[i] >= V))
          status |= DDS_REQ_BAD_TOKEN_ID;
        const float* src =
            cpu::row_as_f32(a.logits, a.dtype, (int64_t)i * a.row_stride, V, s.x.data());
        int32_t nf = 0;
        for (int32_t t = 0; t < V; ++t) {
          float x = cpu::sanitize(src[t]) * invT;
          if (x == kInf) x = FLT_MAX;
          if (!allowed(mask, t)) x = -kInf;
          v[t] = x;
          nf += x > -kInf;
        }
        const int32_t amax = nf > 0 ? top_two(v, V).first : -1;
        // log-probs as (v - M) - log Z (see distribution_stats: M + log Z loses log Z when M is
        // near FLT_MAX).
        double M = 0, logS = kInfD;
        if (nf > 0) {
          M = v[amax];
          logS = std::log(exp_sum(v, V, M));
        }
        sorted.clear();
        for (int32_t t = 0; t < V; ++t)
          if (v[t] > -kInf) sorted.push_back(v[t]);
        std::sort(sorted.begin(), sorted.end());
        auto value_of = [&](int32_t t) -> float {
          if (v[t] == -kInf) return -kInf;
          return a.logits_mode ? v[t] : (float)(((double)v[t] - M) - logS);
        };
        auto rank_of = [&](int32_t t) -> int32_t {
          const float x = v[t];
          const size_t greater =
              sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), x);
          return (int32_t)(1 + greater);
        };
        const int64_t base = ((int64_t)slot * a.rows_per_slot + j) * E;
        auto put = [&](int32_t e, int32_t tok, float val, int32_t rank) {
          if (a.out_token_ids) a.out_token_ids[base + e] = tok;
          if (a.out_logprobs) a.out_logprobs[base + e] = val;
          if (a.out_ranks) a.out_ranks[base + e] = rank;
        };
        auto put_token = [&](int32_t e, int32_t tok) {
          if (tok < 0 || tok >= V)
            put(e, tok, -kInf, 0);
          else
            put(e, tok, value_of(tok), rank_of(tok));
        };
        // Entry 0.
        if (a.committed_tokens) {
          put_token(0, a.committed_tokens[i]);
        } else if (amax >= 0) {
          put_token(0, amax);
        } else {
          put(0, 0, -kInf, 0);
        }
        // Entries 1..n.
        if (n_ids > 0) {
          for (int32_t e = 1; e <= n; ++e) {
            if (e <= n_ids)
              put_token(e, a.token_ids[(int64_t)r * n + e - 1]);
            else
              put(e, 0, -kInf, 0);
          }
        } else if (n > 0) {
          idx.clear();
          for (int32_t t = 0; t < V; ++t)
            if (v[t] > -kInf) idx.push_back(t);
          const int32_t take = std::min<int32_t>(n, (int32_t)idx.size());
          auto cmp = [&](int32_t s, int32_t t) { return v[s] > v[t] || (v[s] == v[t] && s < t); };
          std::partial_sort(idx.begin(), idx.begin() + take, idx.end(), cmp);
          for (int32_t e = 1; e <= n; ++e) {
            if (e <= take)
              put_token(e, idx[e - 1]);
            else
              put(e, 0, -kInf, 0);
          }
        }
      }
      if (a.request_status) a.request_status[r] = status;
    }
    return DDS_OK;
  }

  dds_status copy_to_host(void* dst, const void* src, size_t bytes, dds_stream) override {
    std::memcpy(dst, src, bytes);
    return DDS_OK;
  }
  dds_status check_pointer(const void*, const char*, const char*) override { return DDS_OK; }
  bool host_readable() const override { return true; }

 private:
  dds_sampler_config cfg_;
  CpuPool pool_;
  void ensure_scratch() {
    while ((int)scratch_.size() < pool_.threads()) scratch_.emplace_back(cfg_.vocab_size);
  }
  std::vector<Scratch> scratch_;       // one per participant of the pool
  std::vector<RequestParams> params_;  // [>= the call's num_requests]
  std::vector<int32_t> row_request_;   // [>= the call's num_rows]
  std::vector<char> row_empty_;        // [>= the call's num_rows]
};

}  // namespace

dds_status make_cpu_backend(const dds_sampler_config& cfg, std::unique_ptr<Backend>* out) {
  out->reset(new CpuBackend(cfg));
  return DDS_OK;
}

}  // namespace dds
