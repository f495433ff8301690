// Shared helpers of the CPU test executables (header only; every tests/cpu/*.cpp is its own
// executable). Includes the public header as C++ (the "header compiles as C++" check).
#ifndef DDS_TESTS_CPU_TEST_UTIL_H_
#define DDS_TESTS_CPU_TEST_UTIL_H_

#include <dds/dds.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dtype.h"
#include "rng.h"

namespace tu {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Poison values written into every output before a call, to catch unwritten / overwritten
// elements.
constexpr int32_t kPoisonI = -7;
constexpr float kPoisonF = 12345.f;
constexpr uint16_t kPoisonH = 0x5a5a;

// RAII sampler on the CPU backend.
struct Sampler {
  dds_sampler* s = nullptr;
  explicit Sampler(int32_t vocab, int32_t max_rows = 4096, int32_t max_requests = 1024,
                   int32_t max_stash_width = 20, uint32_t flags = 0) {
    dds_sampler_config c;
    REQUIRE(dds_sampler_config_init(&c, sizeof c) == DDS_OK);
    c.backend = DDS_BACKEND_CPU;
    c.vocab_size = vocab;
    c.max_rows = max_rows;
    c.max_requests = max_requests;
    c.max_stash_width = max_stash_width;
    c.flags = flags;
    const dds_status st = dds_create(&c, &s);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
    REQUIRE(s != nullptr);
  }
  ~Sampler() { dds_destroy(s); }
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  operator dds_sampler*() const { return s; }
};

inline dds_sample_args sample_args() {
  dds_sample_args a;
  std::memset(&a, 0xab, sizeof a);  // init must set every field
  REQUIRE(dds_sample_args_init(&a, sizeof a) == DDS_OK);
  return a;
}

inline dds_stash_args stash_args() {
  dds_stash_args a;
  std::memset(&a, 0xab, sizeof a);
  REQUIRE(dds_stash_args_init(&a, sizeof a) == DDS_OK);
  return a;
}

// All outputs of dds_sample for num_rows rows (probs optional), pre-poisoned.
struct Outputs {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, confidence, margin, entropy, probs;
  Outputs(int32_t rows, int32_t requests, int64_t probs_elems = 0)
      : tokens(rows, kPoisonI),
        argmax(rows, kPoisonI),
        status(requests, kPoisonI),
        logprobs(rows, kPoisonF),
        confidence(rows, kPoisonF),
        margin(rows, kPoisonF),
        entropy(rows, kPoisonF),
        probs(probs_elems, kPoisonF) {}
  void attach(dds_sample_args* a) {
    a->tokens = tokens.data();
    a->argmax = argmax.data();
    a->request_status = status.data();
    a->logprobs = logprobs.data();
    a->confidence = confidence.data();
    a->margin = margin.data();
    a->entropy = entropy.data();
    if (!probs.empty()) {
      a->probs = probs.data();
      a->probs_dtype = DDS_DTYPE_F32;
    }
  }
  bool untouched() const {
    auto ci = [](const std::vector<int32_t>& v) {
      return std::all_of(v.begin(), v.end(), [](int32_t x) { return x == kPoisonI; });
    };
    auto cf = [](const std::vector<float>& v) {
      return std::all_of(v.begin(), v.end(), [](float x) { return x == kPoisonF; });
    };
    return ci(tokens) && ci(argmax) && ci(status) && cf(logprobs) && cf(confidence) &&
           cf(margin) && cf(entropy) && cf(probs);
  }
};

// Runs one dds_sample with all scalar outputs for a call whose layout fields are already set in
// a; REQUIREs DDS_OK. run_sample_probs adds a dense f32 probs matrix.
inline Outputs run_sample(dds_sampler* s, dds_sample_args a) {
  Outputs o(a.num_rows, a.num_requests, 0);
  o.attach(&a);
  const dds_status st = dds_sample(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  return o;
}

inline Outputs run_sample_probs(dds_sampler* s, dds_sample_args a, int32_t vocab) {
  Outputs o(a.num_rows, a.num_requests, (int64_t)a.num_rows * vocab);
  o.attach(&a);
  const dds_status st = dds_sample(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  return o;
}

// Simple one-row-per-request / ragged call on f32 logits.
inline dds_sample_args basic_args(const std::vector<float>& logits, int32_t rows) {
  dds_sample_args a = sample_args();
  a.num_rows = rows;
  a.num_requests = rows;
  a.logits = logits.data();
  return a;
}

// The spec's processed distribution (docs/sampling.md §2-3), computed independently in long
// double from the guided+banned values l (fp32, after §2 steps 1-2). Returns probabilities over
// all columns (0 off the kept set). T > 0 (non-greedy) only.
struct RefParams {
  float T = 1.f;
  int32_t k = 0;
  float p = 1.f;
  float min_p = 0.f;
};

inline std::vector<long double> ref_processed(const std::vector<float>& l, const RefParams& q,
                                              std::vector<char>* keep_out = nullptr) {
  const int32_t V = (int32_t)l.size();
  const float invT = 1.0f / q.T;
  std::vector<float> a(V);
  std::vector<int32_t> order;
  for (int32_t t = 0; t < V; ++t) {
    float v = l[t] * invT;
    if (v == kInf) v = FLT_MAX;
    if (v == -kInf && l[t] > -kInf) v = -FLT_MAX;  // a K0 column stays finite
    a[t] = v;
    if (l[t] > -kInf) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t s, int32_t t) { return a[s] > a[t]; });
  std::vector<char> keep(V, 0);
  if (order.empty()) {
    if (keep_out) *keep_out = keep;
    return std::vector<long double>(V, 0.0L);
  }
  const double m = a[order[0]];
  size_t n = order.size();
  if (q.k > 0 && (size_t)q.k < n) n = q.k;
  std::vector<int32_t> kept(order.begin(), order.begin() + n);
  if (q.p < 1.f) {
    double Z1 = 0;
    for (int32_t t : kept) Z1 += std::exp((double)a[t] - m);
    const double target = (double)q.p * Z1;
    double S = 0;
    size_t cut = kept.size();
    for (size_t i = 0; i < kept.size(); ++i) {
      if (i > 0 && !(S < target)) {
        cut = i;
        break;
      }
      S += std::exp((double)a[kept[i]] - m);
    }
    kept.resize(cut);
  }
  if (q.min_p > 0.f) {
    const double mp = std::min(1.0, (double)q.min_p);
    std::vector<int32_t> k2;
    for (int32_t t : kept)
      if (std::exp((double)a[t] - m) >= mp) k2.push_back(t);
    kept = k2;
  }
  long double Z = 0;
  for (int32_t t : kept) Z += std::exp((long double)a[t] - (long double)m);
  std::vector<long double> p(V, 0.0L);
  for (int32_t t : kept) {
    p[t] = std::exp((long double)a[t] - (long double)m) / Z;
    keep[t] = 1;
  }
  if (keep_out) *keep_out = keep;
  return p;
}

// Softmax over the finite columns of x in long double.
inline std::vector<long double> ref_softmax(const std::vector<float>& x) {
  long double M = -INFINITY;
  for (float v : x)
    if (v > -kInf) M = std::max(M, (long double)v);
  std::vector<long double> p(x.size(), 0.0L);
  if (M == -INFINITY) return p;
  long double Z = 0;
  for (float v : x)
    if (v > -kInf) Z += std::exp((long double)v - M);
  for (size_t t = 0; t < x.size(); ++t)
    if (x[t] > -kInf) p[t] = std::exp((long double)x[t] - M) / Z;
  return p;
}

inline long double ref_entropy(const std::vector<long double>& p) {
  long double h = 0;
  for (long double v : p)
    if (v > 0) h -= v * std::log(v);
  return h;
}

// Upper critical value of the chi-square distribution with df degrees of freedom at tail
// probability alpha = 1e-6 (z = 4.753424), by the Wilson-Hilferty approximation.
inline double chi2_critical_1e6(int df) {
  const double z = 4.753424308822899;
  const double h = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
}

// Pearson chi-square of counts against expected probabilities; bins with expected count < 5 are
// pooled into one bin. Returns the statistic and sets *df.
inline double chi_square(const std::vector<long long>& counts, const std::vector<long double>& p,
                         long long n, int* df, long long* outside = nullptr) {
  double stat = 0;
  int bins = 0;
  long double pooled_p = 0;
  long long pooled_c = 0, out = 0;
  for (size_t t = 0; t < counts.size(); ++t) {
    if (p[t] == 0) {
      out += counts[t];
      continue;
    }
    const long double e = p[t] * n;
    if (e < 5) {
      pooled_p += p[t];
      pooled_c += counts[t];
      continue;
    }
    const double d = (double)(counts[t] - e);
    stat += d * d / (double)e;
    ++bins;
  }
  if (pooled_p > 0) {
    const long double e = pooled_p * n;
    const double d = (double)(pooled_c - e);
    stat += d * d / (double)e;
    ++bins;
  }
  *df = std::max(1, bins - 1);
  if (outside) *outside = out;
  return stat;
}

inline std::vector<float> random_row(std::mt19937_64& rng, int32_t V, float sigma) {
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> r(V);
  for (auto& v : r) v = nd(rng);
  return r;
}

inline bool contains(const char* hay, const char* needle) {
  return std::strstr(hay, needle) != nullptr;
}

}  // namespace tu

#endif  // DDS_TESTS_CPU_TEST_UTIL_H_
