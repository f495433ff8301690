// Shared by the GPU reliability tests (test_gpu_reliability.cu, test_gpu_faults.cu), host code
// only: poisoned outputs and the bit-exact float comparison, DevMem (a test's device copies of
// host arrays), a dds_sample case (SCase / SOut) bound to host or device arrays and compared GPU
// against CPU (SampleDiff), Duo (a CPU and a CUDA sampler of one configuration) running a case on
// both, and the same for dds_stash_logprobs (TCase / TOut, stash_both). Include it after
// gpu_main.h (doctest and DDS_CUDA_CHECK); everything is in an anonymous namespace, one copy per
// test program.
#ifndef DDS_TESTS_GPU_RELIABILITY_COMMON_H_
#define DDS_TESTS_GPU_RELIABILITY_COMMON_H_

#include <cuda_runtime.h>
#include <dds/dds.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dtype.h"
#include "sample_problem.h"  // esz, put_value, get_value, kInf, sample_rows

namespace {

using std::vector;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int32_t kPoisonI = -7;
constexpr uint32_t kPoisonBits = 0x7fa5a5a5u;  // a NaN that no output may hold
constexpr uint8_t kPoisonByte = 0xa5;           // probs bytes: 0xa5a5 is a finite bf16/f16

float poison_f() {
  float f;
  std::memcpy(&f, &kPoisonBits, 4);
  return f;
}
bool is_poison(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b == kPoisonBits;
}
bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }
bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// g (GPU) against c (CPU): equal bits (also -inf == -inf, and NaN of the same bits), else within
// rel / abs.
bool close_bits(float g, float c, double rel = 1e-5, double abs_tol = 1e-6) {
  if (same_bits(g, c) || g == c) return true;
  if (std::isnan(g) || std::isnan(c) || std::isinf(g) || std::isinf(c)) return false;
  return std::fabs((double)g - (double)c) <= rel * std::fabs((double)c) + abs_tol;
}

// Device allocations of one test or one worker thread; no doctest asserts (used in threads).
struct DevMem {
  vector<void*> ptrs;
  bool ok = true;
  std::string err;
  DevMem() = default;
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  ~DevMem() {
    for (void* p : ptrs) cudaFree(p);
  }
  void note(cudaError_t e, const char* what) {
    if (e != cudaSuccess && ok) {
      ok = false;
      err = std::string(what) + ": " + cudaGetErrorString(e);
    }
  }
  void* raw(size_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    note(e, "cudaMalloc");
    if (e != cudaSuccess) return nullptr;
    ptrs.push_back(p);
    return p;
  }
  template <class T>
  T* up(const vector<T>& v) {
    if (v.empty()) return nullptr;
    T* p = static_cast<T*>(raw(v.size() * sizeof(T)));
    if (p) note(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
    return p;
  }
  template <class T>
  void down(vector<T>& v, const void* p) {
    if (p == nullptr || v.empty()) return;
    note(cudaMemcpy(v.data(), p, v.size() * sizeof(T), cudaMemcpyDeviceToHost), "download");
  }
};

template <class T>
T* host_ptr(const vector<T>& v) {
  return v.empty() ? nullptr : const_cast<T*>(v.data());
}

// =============================================================================================
// dds_sample cases
struct SCase {
  int32_t V = 0, rows = 0, R = 0, dtype = DDS_DTYPE_F32;
  int64_t stride = 0;  // 0 = V
  vector<uint8_t> logits;
  bool use_uncond = false;
  vector<uint8_t> uncond;
  int32_t unrows = 0;
  int64_t ustride = 0;
  vector<int32_t> offs, pos, uoffs, K;  // empty = NULL
  vector<float> T, G, P, MP;
  vector<uint64_t> seeds;
  vector<uint32_t> steps;
  float temperature = 1.f, guidance = 0.f, top_p = 1.f, min_p = 0.f;
  int32_t top_k = 0;
  uint64_t seed = 0;
  uint32_t step = 0;
  int32_t banned = -1, stats = DDS_STATS_PROCESSED;
  bool want_probs = true;
  int32_t probs_dtype = DDS_DTYPE_F32;
  int64_t probs_stride = 0;  // 0 = V
  int64_t ps() const { return probs_stride ? probs_stride : V; }
  int64_t ls() const { return stride ? stride : V; }
};

struct SOut {
  vector<int32_t> tokens, argmax, status;
  vector<float> lp, conf, margin, ent;
  vector<uint8_t> probs;
  void poison(const SCase& c) {
    tokens.assign(c.rows, kPoisonI);
    argmax.assign(c.rows, kPoisonI);
    status.assign(c.R, kPoisonI);
    lp.assign(c.rows, poison_f());
    conf.assign(c.rows, poison_f());
    margin.assign(c.rows, poison_f());
    ent.assign(c.rows, poison_f());
    probs.assign(c.want_probs ? (size_t)c.rows * c.ps() * esz(c.probs_dtype) : 0, kPoisonByte);
  }
  float prob(const SCase& c, int32_t i, int32_t t) const {
    return get_value(probs, c.probs_dtype, (size_t)i * c.ps() + t);
  }
};

// Arguments of a case; `put` maps an input or (poisoned) output vector to the pointer the
// backend gets (the host vector itself, or a device copy).
template <class Put>
dds_sample_args build_sample(const SCase& c, SOut& o, Put&& put) {
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = c.rows;
  a.num_requests = c.R;
  a.row_offsets = put(c.offs);
  a.positions = put(c.pos);
  a.logits = put(c.logits);
  a.dtype = c.dtype;
  a.row_stride = c.stride;
  if (c.use_uncond) {
    a.uncond_logits = put(c.uncond);
    a.uncond_row_stride = c.ustride;
    a.uncond_num_rows = c.unrows;
    a.uncond_row_offsets = put(c.uoffs);
  }
  a.guidance_scales = put(c.G);
  a.guidance_scale = c.guidance;
  a.temperatures = put(c.T);
  a.temperature = c.temperature;
  a.top_ks = put(c.K);
  a.top_k = c.top_k;
  a.top_ps = put(c.P);
  a.top_p = c.top_p;
  a.min_ps = put(c.MP);
  a.min_p = c.min_p;
  a.seeds = put(c.seeds);
  a.seed = c.seed;
  a.steps = put(c.steps);
  a.step = c.step;
  a.banned_token = c.banned;
  a.stats = c.stats;
  a.tokens = put(o.tokens);
  a.argmax = put(o.argmax);
  a.logprobs = put(o.lp);
  a.confidence = put(o.conf);
  a.margin = put(o.margin);
  a.entropy = put(o.ent);
  a.request_status = put(o.status);
  if (c.want_probs) {
    a.probs = put(o.probs);
    a.probs_dtype = c.probs_dtype;
    a.probs_row_stride = c.probs_stride;
  }
  return a;
}

dds_status run_cpu_sample(dds_sampler* s, const SCase& c, SOut& o, std::string* msg) {
  o.poison(c);
  dds_sample_args a = build_sample(c, o, [](const auto& v) { return host_ptr(v); });
  const dds_status st = dds_sample(s, &a, nullptr);
  if (st != DDS_OK && msg) *msg = dds_last_error();
  return st;
}

// Uploads inputs and poisoned outputs; the caller queues dds_sample(s, a, stream).
dds_sample_args bind_gpu_sample(const SCase& c, SOut& o, DevMem& dm) {
  o.poison(c);
  return build_sample(c, o, [&dm](const auto& v) { return dm.up(v); });
}

void fetch_gpu_sample(const dds_sample_args& a, SOut& o, DevMem& dm) {
  dm.down(o.tokens, a.tokens);
  dm.down(o.argmax, a.argmax);
  dm.down(o.lp, a.logprobs);
  dm.down(o.conf, a.confidence);
  dm.down(o.margin, a.margin);
  dm.down(o.ent, a.entropy);
  dm.down(o.status, a.request_status);
  dm.down(o.probs, a.probs);
}

struct SampleDiff {
  long long rows = 0, differing = 0, token_diff = 0, hard = 0;
  vector<std::string> msgs;
  void add(const SampleDiff& d) {
    rows += d.rows;
    differing += d.differing;
    token_diff += d.token_diff;
    hard += d.hard;
    for (const auto& m : d.msgs)
      if (msgs.size() < 20) msgs.push_back(m);
  }
};

// GPU against CPU. Hard failures (never allowed): a status or argmax that differs, a token out of
// [0, V), a poisoned (unwritten) output, a probs element outside the row's stride being written.
// Differing rows (allowed only at near-ties): another token, or statistics beyond tolerance.
SampleDiff compare_sample(const SCase& c, const SOut& cpu, const SOut& gpu, const std::string& what) {
  SampleDiff d;
  auto hard = [&](const std::string& m) {
    ++d.hard;
    if (d.msgs.size() < 12) d.msgs.push_back(what + ": " + m);
  };
  for (int32_t r = 0; r < c.R; ++r)
    if (gpu.status[r] != cpu.status[r])
      hard("request " + std::to_string(r) + " status " + std::to_string(gpu.status[r]) +
           " (cpu " + std::to_string(cpu.status[r]) + ")");
  double prel = 1e-5, pabs = 1e-6;
  if (c.probs_dtype == DDS_DTYPE_BF16) prel = 1.0 / 128;
  if (c.probs_dtype == DDS_DTYPE_F16) prel = 1.0 / 1024, pabs = 1e-7;
  for (int32_t i = 0; i < c.rows; ++i) {
    ++d.rows;
    const int32_t tg = gpu.tokens[i];
    if (tg < 0 || tg >= c.V) hard("row " + std::to_string(i) + " token " + std::to_string(tg));
    if (gpu.argmax[i] != cpu.argmax[i])
      hard("row " + std::to_string(i) + " argmax " + std::to_string(gpu.argmax[i]) + " (cpu " +
           std::to_string(cpu.argmax[i]) + ")");
    for (float v : {gpu.lp[i], gpu.conf[i], gpu.margin[i], gpu.ent[i]})
      if (is_poison(v)) hard("row " + std::to_string(i) + " statistic not written");
    bool ok = tg == cpu.tokens[i];
    if (!ok) ++d.token_diff;
    ok = ok && close_bits(gpu.lp[i], cpu.lp[i]) && close_bits(gpu.conf[i], cpu.conf[i]) &&
         close_bits(gpu.margin[i], cpu.margin[i]) && close_bits(gpu.ent[i], cpu.ent[i]);
    if (c.want_probs) {
      for (int32_t t = 0; t < c.V && ok; ++t)
        ok = close_bits(gpu.prob(c, i, t), cpu.prob(c, i, t), prel, pabs);
      // The padding between V and the probs stride is the caller's: never written.
      const size_t e = esz(c.probs_dtype);
      for (int64_t t = c.V; t < c.ps(); ++t)
        for (size_t b = 0; b < e; ++b)
          if (gpu.probs[((size_t)i * c.ps() + t) * e + b] != kPoisonByte) {
            hard("row " + std::to_string(i) + " probs padding column " + std::to_string(t) +
                 " written");
            t = c.ps();
            break;
          }
    }
    if (!ok) {
      ++d.differing;
      if (d.msgs.size() < 12) {
        std::ostringstream m;
        m << what << ": row " << i << " token " << tg << " vs " << cpu.tokens[i] << ", logprob "
          << gpu.lp[i] << " vs " << cpu.lp[i] << ", conf " << gpu.conf[i] << " vs " << cpu.conf[i]
          << ", margin " << gpu.margin[i] << " vs " << cpu.margin[i] << ", entropy " << gpu.ent[i]
          << " vs " << cpu.ent[i];
        d.msgs.push_back(m.str());
      }
    }
  }
  return d;
}

// A CPU and a CUDA sampler of one configuration.
struct Duo {
  dds_sampler* cpu = nullptr;
  dds_sampler* gpu = nullptr;
  Duo(int32_t V, int32_t max_rows = 256, int32_t max_requests = 256, int32_t width = 20,
      uint32_t flags = 0) {
    cpu = make_sampler(DDS_BACKEND_CPU, V, max_rows, max_requests, width, flags);
    gpu = make_sampler(DDS_BACKEND_CUDA, V, max_rows, max_requests, width, flags);
  }
  ~Duo() {
    cudaDeviceSynchronize();
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
  Duo(const Duo&) = delete;
  Duo& operator=(const Duo&) = delete;
};

// Runs the case on both backends; REQUIREs DDS_OK on both, no hard failure and (hostile cases are
// small and exact) identical tokens and statistics. Returns the GPU outputs.
SOut both_once(Duo& d, const SCase& c, const std::string& what, int allowed_differing = 0) {
  INFO(what);
  SOut oc, og;
  std::string msg;
  const dds_status sc = run_cpu_sample(d.cpu, c, oc, &msg);
  INFO("cpu: " << msg);
  REQUIRE(sc == DDS_OK);
  DevMem dm;
  dds_sample_args a = bind_gpu_sample(c, og, dm);
  REQUIRE(dm.ok);
  const dds_status sg = dds_sample(d.gpu, &a, nullptr);
  INFO("gpu: " << dds_last_error());
  REQUIRE(sg == DDS_OK);
  DDS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  DDS_CUDA_CHECK(cudaGetLastError());
  fetch_gpu_sample(a, og, dm);
  INFO(dm.err);
  REQUIRE(dm.ok);
  const SampleDiff diff = compare_sample(c, oc, og, what);
  for (const auto& m : diff.msgs) MESSAGE(m);
  CHECK(diff.hard == 0);
  CHECK(diff.differing <= allowed_differing);
  return og;
}

// Both stats modes (the token never depends on them); returns the processed-mode GPU outputs.
SOut both(Duo& d, SCase c, const std::string& what, int allowed_differing = 0) {
  c.stats = DDS_STATS_GUIDED;
  const SOut g = both_once(d, c, what + " [guided stats]", allowed_differing);
  c.stats = DDS_STATS_PROCESSED;
  SOut p = both_once(d, c, what + " [processed stats]", allowed_differing);
  CHECK(g.tokens == p.tokens);
  CHECK(g.argmax == p.argmax);
  CHECK(g.status == p.status);
  return p;
}

// One row per request, f32 (or `dtype`) rows of equal length.
SCase rows_case(const vector<vector<float>>& rows, int32_t dtype = DDS_DTYPE_F32) {
  SCase c;
  c.V = (int32_t)rows[0].size();
  c.rows = c.R = (int32_t)rows.size();
  c.dtype = dtype;
  c.logits.assign((size_t)c.rows * c.V * esz(dtype), 0);
  for (int32_t i = 0; i < c.rows; ++i)
    for (int32_t t = 0; t < c.V; ++t) put_value(c.logits, dtype, (size_t)i * c.V + t, rows[i][t]);
  return c;
}

// Per-request arrays of R requests with neutral values (every pointer given).
void neutral_arrays(SCase& c) {
  c.T.assign(c.R, 1.f);
  c.G.assign(c.R, 0.f);
  c.P.assign(c.R, 1.f);
  c.MP.assign(c.R, 0.f);
  c.K.assign(c.R, 0);
  c.seeds.resize(c.R);
  c.steps.resize(c.R);
  for (int32_t r = 0; r < c.R; ++r) {
    c.seeds[r] = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    c.steps[r] = (uint32_t)(r % 5);
  }
}

vector<float> ramp(int32_t V, float scale = 1.f, float offset = 0.f) {
  vector<float> r(V);
  for (int32_t t = 0; t < V; ++t) r[t] = offset + scale * (float)((t * 7) % V) / (float)V;
  return r;
}
int32_t first_max(const vector<float>& r) {
  int32_t b = 0;
  for (int32_t t = 1; t < (int32_t)r.size(); ++t)
    if (r[t] > r[b]) b = t;
  return b;
}

void check_empty_row(const SCase& c, const SOut& o, int32_t i) {
  INFO("empty row " << i);
  CHECK(o.tokens[i] == 0);
  CHECK(o.argmax[i] == 0);
  CHECK(o.lp[i] == -kInf);
  CHECK(o.conf[i] == 0.f);
  CHECK(o.margin[i] == 0.f);
  CHECK(o.ent[i] == 0.f);
  if (c.want_probs) {
    bool zero = true;
    for (int32_t t = 0; t < c.V; ++t) zero = zero && o.prob(c, i, t) == 0.f;
    CHECK(zero);
  }
}

// =============================================================================================
// dds_stash_logprobs cases
struct TCase {
  int32_t V = 0, rows = 0, R = 0, dtype = DDS_DTYPE_F32, n = 3;
  int64_t stride = 0;
  vector<uint8_t> logits;
  vector<int32_t> offs, slots, nvalid, committed, ids, nids;  // empty = NULL
  vector<uint8_t> keep;
  vector<float> T;
  float temperature = 1.f;
  int32_t num_slots = 1, rows_per_slot = 1, logits_mode = 0;
  size_t out_elems() const { return (size_t)num_slots * rows_per_slot * (n + 1); }
};
struct TOut {
  vector<int32_t> tok, rank, status;
  vector<float> val;
  void poison(const TCase& c) {
    tok.assign(c.out_elems(), kPoisonI);
    rank.assign(c.out_elems(), kPoisonI);
    val.assign(c.out_elems(), poison_f());
    status.assign(c.R, kPoisonI);
  }
};

template <class Put>
dds_stash_args build_stash(const TCase& c, TOut& o, Put&& put) {
  dds_stash_args a;
  dds_stash_args_init(&a, sizeof a);
  a.num_rows = c.rows;
  a.num_requests = c.R;
  a.row_offsets = put(c.offs);
  a.logits = put(c.logits);
  a.dtype = c.dtype;
  a.row_stride = c.stride;
  a.keep = put(c.keep);
  a.slots = put(c.slots);
  a.num_valid = put(c.nvalid);
  a.temperatures = put(c.T);
  a.temperature = c.temperature;
  a.committed_tokens = put(c.committed);
  a.token_ids = put(c.ids);
  a.num_token_ids = put(c.nids);
  a.num_top = c.n;
  a.logits_mode = c.logits_mode;
  a.num_slots = c.num_slots;
  a.rows_per_slot = c.rows_per_slot;
  a.out_token_ids = put(o.tok);
  a.out_logprobs = put(o.val);
  a.out_ranks = put(o.rank);
  a.request_status = put(o.status);
  return a;
}

void fetch_gpu_stash(const dds_stash_args& a, TOut& o, DevMem& dm) {
  dm.down(o.tok, a.out_token_ids);
  dm.down(o.val, a.out_logprobs);
  dm.down(o.rank, a.out_ranks);
  dm.down(o.status, a.request_status);
}

// Token ids, ranks and statuses exact; values within 1e-5 relative (bits for -inf and poison).
long long compare_stash(const TCase& c, const TOut& cpu, const TOut& gpu, const std::string& what,
                        vector<std::string>* msgs) {
  long long bad = 0;
  auto note = [&](const std::string& m) {
    ++bad;
    if (msgs && msgs->size() < 12) msgs->push_back(what + ": " + m);
  };
  for (int32_t r = 0; r < c.R; ++r)
    if (gpu.status[r] != cpu.status[r])
      note("request " + std::to_string(r) + " status " + std::to_string(gpu.status[r]) + " (cpu " +
           std::to_string(cpu.status[r]) + ")");
  for (size_t e = 0; e < c.out_elems(); ++e) {
    if (gpu.tok[e] != cpu.tok[e] || gpu.rank[e] != cpu.rank[e] || !close_bits(gpu.val[e], cpu.val[e])) {
      std::ostringstream m;
      m << "element " << e << " (slot " << e / ((size_t)c.rows_per_slot * (c.n + 1)) << "): token "
        << gpu.tok[e] << " vs " << cpu.tok[e] << ", rank " << gpu.rank[e] << " vs " << cpu.rank[e]
        << ", value " << gpu.val[e] << " vs " << cpu.val[e];
      note(m.str());
    }
  }
  return bad;
}

// Runs a stash case on both backends; REQUIREs DDS_OK and identical outputs. Returns the GPU's.
TOut stash_both(Duo& d, const TCase& c, const std::string& what) {
  INFO(what);
  TOut oc, og;
  oc.poison(c);
  dds_stash_args ac = build_stash(c, oc, [](const auto& v) { return host_ptr(v); });
  const dds_status sc = dds_stash_logprobs(d.cpu, &ac, nullptr);
  INFO("cpu: " << dds_last_error());
  REQUIRE(sc == DDS_OK);
  DevMem dm;
  og.poison(c);
  dds_stash_args ag = build_stash(c, og, [&dm](const auto& v) { return dm.up(v); });
  REQUIRE(dm.ok);
  const dds_status sg = dds_stash_logprobs(d.gpu, &ag, nullptr);
  INFO("gpu: " << dds_last_error());
  REQUIRE(sg == DDS_OK);
  DDS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  DDS_CUDA_CHECK(cudaGetLastError());
  fetch_gpu_stash(ag, og, dm);
  REQUIRE(dm.ok);
  vector<std::string> msgs;
  const long long bad = compare_stash(c, oc, og, what, &msgs);
  for (const auto& m : msgs) MESSAGE(m);
  CHECK(bad == 0);
  return og;
}

}  // namespace

#endif  // DDS_TESTS_GPU_RELIABILITY_COMMON_H_
