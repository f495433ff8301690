// A straightforward reference of dds_sample on the CPU: the CPU backend as it was written for
// clarity (one row at a time, std::vector per call, a dtype switch per element, every token
// Gumbel of the winning block evaluated, every sum and exp in float64 in column order), kept
// here so that tests/cpu/test_cpu_fast.cpp can check the backend's fast path against it: the
// same tokens except where two block scores tie within the fp32 block sums' rounding (the
// reference gives its block scores for that check), statistics within 1e-5 relative.
#ifndef DDS_TESTS_CPU_CPU_REFERENCE_H_
#define DDS_TESTS_CPU_CPU_REFERENCE_H_

#include <dds/dds.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "dtype.h"
#include "rng.h"

namespace ref {
using namespace dds;

// Samples a column of [0, V) with probability proportional to exp(w(t)), evaluating every
// Gumbel in id order; with `scores`, each block's score (-inf for a block with no kept column).
template <typename LogWeight>
int32_t two_level_gumbel_max(int32_t V, LogWeight w, uint64_t seed, uint32_t step, uint32_t pos,
                             uint32_t block_salt, uint32_t token_salt,
                             std::vector<double>* scores = nullptr) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  double m = kNegInf;
  for (int32_t t = 0; t < V; ++t) m = std::max(m, w(t));
  if (m == kNegInf) return 0;
  int32_t best_block = -1;
  double best = kNegInf;
  if (scores) scores->assign((V - 1) / kBlockSize + 1, kNegInf);
  for (int32_t b = 0; b * kBlockSize < V; ++b) {
    const int32_t lo = b * kBlockSize, hi = std::min(V, lo + kBlockSize);
    double s = 0;
    bool any = false;
    for (int32_t t = lo; t < hi; ++t) {
      const double x = w(t);
      if (x > kNegInf) {
        s += std::exp(x - m);
        any = true;
      }
    }
    if (!any) continue;
    const double score = m + std::log(s) + gumbel(seed, step, pos, (uint32_t)b, block_salt);
    if (scores) (*scores)[b] = score;
    if (best_block < 0 || score > best) {
      best = score;
      best_block = b;
    }
  }
  const int32_t lo = best_block * kBlockSize, hi = std::min(V, lo + kBlockSize);
  int32_t token = -1;
  double best_v = kNegInf;
  for (int32_t t = lo; t < hi; ++t) {
    const double x = w(t);
    if (!(x > kNegInf)) continue;
    const double v = x + gumbel(seed, step, pos, (uint32_t)t, token_salt);
    if (token < 0 || v > best_v) {
      best_v = v;
      token = t;
    }
  }
  return token;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kInfD = std::numeric_limits<double>::infinity();

inline float load(const void* base, int32_t dtype, int64_t idx) {
  switch (dtype) {
    case DDS_DTYPE_F32: return static_cast<const float*>(base)[idx];
    case DDS_DTYPE_BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[idx]);
    default: return f16_to_f32(static_cast<const uint16_t*>(base)[idx]);
  }
}

inline void store(void* base, int32_t dtype, int64_t idx, float v) {
  switch (dtype) {
    case DDS_DTYPE_F32: static_cast<float*>(base)[idx] = v; break;
    case DDS_DTYPE_BF16: static_cast<uint16_t*>(base)[idx] = f32_to_bf16(v); break;
    default: static_cast<uint16_t*>(base)[idx] = f32_to_f16(v); break;
  }
}

// NaN -> -inf, +inf -> FLT_MAX (docs/sampling.md §2).
inline float sanitize(float x) {
  if (std::isnan(x)) return -kInf;
  if (x == kInf) return FLT_MAX;
  return x;
}

// Request parameters after the sanitisation rules of docs/sampling.md §1.
struct RequestParams {
  bool guided = false;
  int64_t uncond_first = 0;
  float g = 0.f;
  float T = 1.f;
  bool greedy = false;
  float invT = 1.f;
  int32_t k = 0;
  float p = 1.f;
  float min_p = 0.f;
  uint64_t seed = 0;
  uint32_t step = 0;
  int32_t status = 0;
};

inline RequestParams request_params(const dds_sample_args& a, int32_t r, int32_t rows_in_request) {
  RequestParams q;
  float T = a.temperatures ? a.temperatures[r] : a.temperature;
  if (std::isnan(T) || T < 0.f || std::isinf(T)) {
    T = 1.f;
    q.status |= DDS_REQ_BAD_TEMPERATURE;
  }
  q.T = T;
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
    int64_t first = -1;
    if (a.uncond_row_offsets == nullptr) {
      first = (a.row_offsets ? a.row_offsets[r] : r);
    } else {
      first = a.uncond_row_offsets[r];
    }
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

struct RowStats {
  double logprob = -kInfD, confidence = 0, margin = 0, entropy = 0;
};

// Statistics of softmax(x) over the columns where mask is set; writes probs when asked.
// `order` lists the set's columns sorted (x desc, t asc) for at least the first two entries
// (only used for p2). Returns the log-normaliser.
inline double distribution_stats(const std::vector<float>& x, const std::vector<char>& in_set,
                          int32_t first, int32_t second, int32_t token, RowStats* st,
                          std::vector<double>* probs) {
  const size_t V = x.size();
  const double M = x[first];
  double Z = 0;
  for (size_t t = 0; t < V; ++t)
    if (in_set[t]) Z += std::exp((double)x[t] - M);
  // log-probabilities as (x - M) - log Z, not x - (M + log Z): with M near FLT_MAX (the +inf
  // rule) M + log Z rounds back to M in float64 and every top token got probability 1.
  const double logS = std::log(Z);
  double ent = 0;
  for (size_t t = 0; t < V; ++t) {
    if (!in_set[t]) {
      if (probs) (*probs)[t] = 0;
      continue;
    }
    const double lp = ((double)x[t] - M) - logS;
    const double p = std::exp(lp);
    if (probs) (*probs)[t] = p;
    if (p > 0) ent -= p * lp;
  }
  const double p1 = std::exp(-logS);
  const double p2 = second >= 0 ? std::exp(((double)x[second] - M) - logS) : 0.0;
  st->confidence = p1;
  st->margin = p1 - p2;
  st->entropy = ent;
  st->logprob = ((double)x[token] - M) - logS;
  return M + logS;
}

// Highest and second highest columns of x over in_set, in order (x desc, t asc).
inline void top_two(const std::vector<float>& x, const std::vector<char>& in_set, int32_t* first,
             int32_t* second) {
  int32_t f = -1, s = -1;
  for (int32_t t = 0; t < (int32_t)x.size(); ++t) {
    if (!in_set[t]) continue;
    if (f < 0 || x[t] > x[f]) {
      s = f;
      f = t;
    } else if (s < 0 || x[t] > x[s]) {
      s = t;
    }
  }
  *first = f;
  *second = s;
}

// §3: top-k, top-p, min-p on x over k0; result in *keep.
inline void filter(const std::vector<float>& x, const std::vector<char>& k0, int32_t n0,
                   const RequestParams& q, std::vector<char>* keep_out,
                   std::vector<int32_t>* order) {
  const int32_t V = (int32_t)x.size();
  std::vector<char>& keep = *keep_out;
  std::copy(k0.begin(), k0.end(), keep.begin());
  const bool use_k = q.k > 0 && q.k < n0;
  const bool use_p = q.p < 1.f;
  const bool use_min_p = q.min_p > 0.f;
  if (!use_k && !use_p && !use_min_p) return;
  double m = -kInfD;
  for (int32_t t = 0; t < V; ++t)
    if (k0[t]) m = std::max(m, (double)x[t]);
  auto cmp = [&](int32_t s, int32_t t) { return x[s] > x[t] || (x[s] == x[t] && s < t); };
  if (use_k || use_p) {
    order->clear();
    for (int32_t t = 0; t < V; ++t)
      if (k0[t]) order->push_back(t);
    if (use_k) {
      std::partial_sort(order->begin(), order->begin() + q.k, order->end(), cmp);
      for (int32_t idx = q.k; idx < (int32_t)order->size(); ++idx) keep[(*order)[idx]] = 0;
      order->resize(q.k);
    } else {
      std::sort(order->begin(), order->end(), cmp);
    }
    if (use_p) {
      double Z1 = 0;
      for (int32_t t : *order) Z1 += std::exp((double)x[t] - m);
      const double target = (double)q.p * Z1;
      double S = 0;
      for (size_t idx = 0; idx < order->size(); ++idx) {
        const int32_t t = (*order)[idx];
        if (idx > 0 && !(S < target)) keep[t] = 0;
        S += std::exp((double)x[t] - m);
      }
    }
  }
  if (use_min_p) {
    for (int32_t t = 0; t < V; ++t)
      if (keep[t] && !(std::exp((double)x[t] - m) >= (double)q.min_p)) keep[t] = 0;
  }
}


inline void write_empty_row(const dds_sample_args& a, int32_t V, int32_t i) {
  if (a.tokens) a.tokens[i] = 0;
  if (a.argmax) a.argmax[i] = 0;
  if (a.logprobs) a.logprobs[i] = -kInf;
  if (a.confidence) a.confidence[i] = 0.f;
  if (a.margin) a.margin[i] = 0.f;
  if (a.entropy) a.entropy[i] = 0.f;
  if (a.probs)
    for (int32_t t = 0; t < V; ++t) store(a.probs, a.probs_dtype, (int64_t)i * a.probs_row_stride + t, 0.f);
}


// With `block_scores`: [num_rows], each sampled row's block scores (empty for other rows).
inline void sample(const dds_sample_args& a, int32_t V,
                   std::vector<std::vector<double>>* block_scores = nullptr) {
    if (block_scores) block_scores->assign(a.num_rows, {});
    if (a.request_status)
      std::fill(a.request_status, a.request_status + a.num_requests, 0);
    std::vector<float> l(V), x(V);
    std::vector<char> k0(V), keep(V);
    std::vector<int32_t> order;
    std::vector<double> probs(a.probs ? V : 0);
    for (int32_t r = 0; r < a.num_requests; ++r) {
      const int32_t row_begin = a.row_offsets ? a.row_offsets[r] : r;
      const int32_t row_end = a.row_offsets ? a.row_offsets[r + 1] : r + 1;
      RequestParams q = request_params(a, r, row_end - row_begin);
      int32_t status = q.status;
      for (int32_t i = row_begin; i < row_end; ++i) {
        const int32_t j = i - row_begin;
        const uint32_t pos = (uint32_t)(a.positions ? a.positions[i] : j);
        // §2: guidance, ban, sanitisation.
        int32_t n0 = 0;
        for (int32_t t = 0; t < V; ++t) {
          const float c = load(a.logits, a.dtype, (int64_t)i * a.row_stride + t);
          float v = c;
          if (q.guided) {
            const float u =
                load(a.uncond_logits, a.dtype, (q.uncond_first + j) * a.uncond_row_stride + t);
            v = (c == -kInf || u == -kInf) ? -kInf : std::fma(q.g, c - u, c);
          }
          if (t == a.banned_token) v = -kInf;
          v = sanitize(v);
          l[t] = v;
          k0[t] = v > -kInf;
          n0 += k0[t];
        }
        if (n0 == 0) {
          status |= DDS_REQ_EMPTY_ROW;
          write_empty_row(a, V, i);
          continue;
        }
        int32_t amax, second_l;
        top_two(l, k0, &amax, &second_l);
        int32_t token;
        if (q.greedy) {
          token = amax;
          std::copy(k0.begin(), k0.end(), keep.begin());
        } else {
          for (int32_t t = 0; t < V; ++t) {
            float v = l[t] * q.invT;
            if (v == kInf) v = FLT_MAX;
            // A finite l whose l * invT overflows to -inf stays in K0 as -FLT_MAX (the mirror of
            // the +inf rule): a K0 column at -inf made m = -inf, the filters NaN, `keep` empty,
            // and the two-level sampler index keep[-1024..-1] (found by reading; tests/fuzz/fuzz_sample
            // re-finds it).
            else if (v == -kInf && k0[t]) v = -FLT_MAX;
            x[t] = v;
          }
          filter(x, k0, n0, q, &keep, &order);
          token = two_level_gumbel_max(  // §4
              V, [&](int32_t t) { return keep[t] ? (double)x[t] : -kInfD; }, q.seed, q.step, pos,
              kSaltBlock, kSaltToken, block_scores ? &(*block_scores)[i] : nullptr);
        }
        // §5 statistics.
        RowStats st;
        const bool want_stats = a.logprobs || a.confidence || a.margin || a.entropy || a.probs;
        if (want_stats) {
          if (a.stats == DDS_STATS_GUIDED) {
            distribution_stats(l, k0, amax, second_l, token, &st, a.probs ? &probs : nullptr);
          } else if (q.greedy) {
            st.logprob = 0;
            st.confidence = 1;
            st.margin = 1;
            st.entropy = 0;
            if (a.probs) {
              std::fill(probs.begin(), probs.end(), 0.0);
              probs[token] = 1.0;
            }
          } else {
            int32_t f, s;
            top_two(x, keep, &f, &s);
            distribution_stats(x, keep, f, s, token, &st, a.probs ? &probs : nullptr);
          }
        }
        if (a.tokens) a.tokens[i] = token;
        if (a.argmax) a.argmax[i] = amax;
        if (a.logprobs) a.logprobs[i] = (float)st.logprob;
        if (a.confidence) a.confidence[i] = (float)st.confidence;
        if (a.margin) a.margin[i] = (float)st.margin;
        if (a.entropy) a.entropy[i] = (float)st.entropy;
        if (a.probs)
          for (int32_t t = 0; t < V; ++t)
            store(a.probs, a.probs_dtype, (int64_t)i * a.probs_row_stride + t, (float)probs[t]);
      }
      if (a.request_status) a.request_status[r] = status;
    }
}


}  // namespace ref

#endif  // DDS_TESTS_CPU_CPU_REFERENCE_H_
