// GPU reliability tests (issue 11), public API only, every result against the CPU oracle:
//  - concurrency: 4 host threads, each with its own CUDA sampler and its own non-blocking stream,
//    50 dds_sample calls each (plus a dds_stash_logprobs every 5th call that reads the tokens of
//    the call before it on the same stream), all in flight together, no synchronisation until the
//    end; every row checked against the CPU backend (near-ties bounded at 0.1% of the rows);
//  - hostile numbers: rows of all -inf / NaN / banned (token 0, DDS_REQ_EMPTY_ROW) at V = 9, 3000
//    and 262144; NaN logits; +inf logits (FLT_MAX, ties in one block and across blocks);
//    temperatures 1e30, FLT_MAX, 1e-30 and denormal (greedy); l * (1/T) overflowing to -inf;
//    guidance scales that overflow; k > V; p <= 0; p > 1; min-p >= 1; denormal logits in f32,
//    bf16, f16; a hostile batch at V = 32001;
//  - device-side faults in per-request arrays (negative k, NaN / negative / infinite T, NaN top-p,
//    NaN / negative min-p, NaN / infinite guidance, uncond_row_offsets past uncond_num_rows):
//    sanitised and flagged in request_status exactly as the CPU does; in DDS_FLAG_DEBUG_CHECKS
//    mode DDS_ERR_INVALID_VALUE naming the array and the request, outputs untouched;
//  - host pointers given to the CUDA backend: DDS_ERR_INVALID_ARGUMENT naming the argument, for
//    every pointer of dds_sample_args and dds_stash_args (pageable and pinned host memory);
//    managed memory accepted;
//  - stash hostile cases: all -inf / NaN rows, +inf, huge and denormal values, bad slots
//    (DDS_REQ_BAD_SLOT, slot untouched), committed tokens and ids out of range, bad and denormal
//    temperatures, num_token_ids / num_valid out of range.
// Every output is poisoned before each call (unwritten elements show up as mismatches). Device
// memory stays under ~250 MB; every buffer that is read back is written first (initcheck).
#include "gpu_main.h"  // first: doctest implementation + main that skips without a device

#include <dds/dds.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dtype.h"

namespace {

using std::vector;

constexpr float kInf = std::numeric_limits<float>::infinity();
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

size_t esz(int32_t dt) { return dt == DDS_DTYPE_F32 ? 4 : 2; }

void put_value(vector<uint8_t>& raw, int32_t dt, size_t idx, float v) {
  if (dt == DDS_DTYPE_F32) {
    std::memcpy(&raw[idx * 4], &v, 4);
  } else {
    const uint16_t h = dt == DDS_DTYPE_BF16 ? dds::f32_to_bf16(v) : dds::f32_to_f16(v);
    std::memcpy(&raw[idx * 2], &h, 2);
  }
}
float get_value(const vector<uint8_t>& raw, int32_t dt, size_t idx) {
  if (dt == DDS_DTYPE_F32) {
    float v;
    std::memcpy(&v, &raw[idx * 4], 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, &raw[idx * 2], 2);
  return dt == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
}

// g (GPU) against c (CPU): equal bits (also -inf == -inf), else within rel / abs.
bool close(float g, float c, double rel = 1e-5, double abs_tol = 1e-6) {
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
    ok = ok && close(gpu.lp[i], cpu.lp[i]) && close(gpu.conf[i], cpu.conf[i]) &&
         close(gpu.margin[i], cpu.margin[i]) && close(gpu.ent[i], cpu.ent[i]);
    if (c.want_probs) {
      for (int32_t t = 0; t < c.V && ok; ++t)
        ok = close(gpu.prob(c, i, t), cpu.prob(c, i, t), prel, pabs);
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
    for (int32_t backend : {DDS_BACKEND_CPU, DDS_BACKEND_CUDA}) {
      dds_sampler_config c;
      REQUIRE(dds_sampler_config_init(&c, sizeof c) == DDS_OK);
      c.backend = backend;
      c.vocab_size = V;
      c.max_rows = max_rows;
      c.max_requests = max_requests;
      c.max_stash_width = width;
      c.flags = flags;
      dds_sampler* s = nullptr;
      const dds_status st = dds_create(&c, &s);
      INFO(dds_last_error());
      REQUIRE(st == DDS_OK);
      (backend == DDS_BACKEND_CPU ? cpu : gpu) = s;
    }
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
    if (gpu.tok[e] != cpu.tok[e] || gpu.rank[e] != cpu.rank[e] || !close(gpu.val[e], cpu.val[e])) {
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

// =============================================================================================
// Random mixed problems for the concurrency test (settings rotate per request, hostile ones
// included: per-request faults, greedy, denormal T, empty rows, +inf, NaN, ties).
SCase random_case(uint64_t seed, int32_t V, int32_t max_rows, int call) {
  std::mt19937_64 rng(seed);
  SCase c;
  c.V = V;
  c.rows = 1 + (int32_t)(rng() % (uint64_t)max_rows);
  c.dtype = call % 3;
  c.stride = (call % 4 == 1) ? V + 3 : 0;
  c.offs.push_back(0);
  while (c.offs.back() < c.rows) {
    const int32_t n = std::min<int32_t>(1 + (int32_t)(rng() % 4), c.rows - c.offs.back());
    c.offs.push_back(c.offs.back() + n);
  }
  c.R = (int32_t)c.offs.size() - 1;
  c.use_uncond = true;
  c.unrows = c.rows + 2;
  c.ustride = (call % 4 == 1) ? V + 1 : 0;
  c.banned = (call % 5 == 0) ? 3 % V : -1;
  c.stats = (call / 2) % 2 ? DDS_STATS_GUIDED : DDS_STATS_PROCESSED;
  c.want_probs = call % 3 == 0;
  c.probs_dtype = (call / 3) % 3;
  c.probs_stride = (call % 2) ? V + 5 : 0;
  for (int32_t r = 0; r < c.R; ++r) {
    const int32_t n = c.offs[r + 1] - c.offs[r];
    float T = 1.f, g = 0.f, p = 1.f, mp = 0.f;
    int32_t k = 0, uo = -1;
    switch ((r + call) % 15) {
      case 0: break;
      case 1: T = 0.f; break;
      case 2: T = 0.7f; g = 1.5f; uo = c.offs[r]; break;
      case 3: k = 50; break;
      case 4: T = 1.3f; p = 0.9f; break;
      case 5: mp = 0.05f; break;
      case 6: T = 0.8f; k = 20; p = 0.8f; mp = 0.02f; g = -0.5f; uo = c.offs[r] + 2; break;
      case 7: p = 0.f; break;
      case 8: T = 2.f; p = 0.5f; g = 2.f; uo = -1; break;
      case 9: T = kNaN; k = -3; p = kNaN; mp = -1.f; g = kInf; uo = 0; break;
      case 10: T = 0.5f; g = 1.f; uo = c.unrows - n + 1; break;  // past the end: flagged
      case 11: T = 1e-39f; g = 3.f; uo = c.offs[r]; break;       // 1/T overflows: greedy
      case 12: k = 1 + (int32_t)(rng() % 3000); p = 0.95f; break;
      case 13: T = 1e30f; k = V + 1; break;
      case 14: T = 1e-30f; k = 5; mp = 2.f; break;
    }
    c.T.push_back(T);
    c.G.push_back(g);
    c.P.push_back(p);
    c.MP.push_back(mp);
    c.K.push_back(k);
    c.uoffs.push_back(uo);
    c.seeds.push_back(rng());
    c.steps.push_back((uint32_t)(rng() % 1000));
  }
  if (call % 2) {
    for (int32_t i = 0; i < c.rows; ++i) c.pos.push_back((int32_t)(rng() % 100000));
  }
  const int64_t ls = c.ls();
  c.logits.assign((size_t)c.rows * ls * esz(c.dtype), 0);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  const float sigmas[4] = {1.f, 2.f, 4.f, 8.f};
  for (int32_t i = 0; i < c.rows; ++i) {
    const float sg = sigmas[rng() % 4];
    const bool empty = call % 6 == 3 && i == c.rows / 2;
    const bool ties = i % 7 == 5;
    const int32_t inf_col = (call % 10 == 7 && i == 0) ? (int32_t)(rng() % V) : -1;
    for (int64_t t = 0; t < ls; ++t) {
      float v = sg * nd(rng);
      if (ties) v = std::round(v * 2.f) / 2.f;
      const float u = ud(rng);
      if (t < V) {
        if (u < 0.01f) v = -kInf;
        else if (u < 0.012f) v = kNaN;
        if (t == inf_col) v = kInf;
        if (empty) v = (t % 2) ? -kInf : kNaN;
      } else {
        v = 1e30f;  // stride padding: never read
      }
      put_value(c.logits, c.dtype, (size_t)i * ls + t, v);
    }
  }
  const int64_t us = c.ustride ? c.ustride : V;
  c.uncond.assign((size_t)c.unrows * us * esz(c.dtype), 0);
  for (int32_t i = 0; i < c.unrows; ++i)
    for (int64_t t = 0; t < us; ++t) {
      float v = 2.f * nd(rng);
      if (ud(rng) < 0.005f) v = -kInf;
      put_value(c.uncond, c.dtype, (size_t)i * us + t, t < V ? v : 1e30f);
    }
  return c;
}

// The stash of a sampled call: same logits and requests, committed tokens = the tokens the GPU
// sampled (the device pointer on the GPU, its downloaded copy on the CPU).
TCase stash_of(const SCase& s, uint64_t seed, int call) {
  std::mt19937_64 rng(seed);
  TCase c;
  c.V = s.V;
  c.rows = s.rows;
  c.R = s.R;
  c.dtype = s.dtype;
  c.stride = s.stride;
  c.offs = s.offs;
  c.n = 5;
  c.logits_mode = (call / 5) % 2;
  c.num_slots = c.R + 2;
  c.rows_per_slot = 4;
  for (int32_t r = 0; r < c.R; ++r) {
    c.keep.push_back(r % 3 != 1);
    c.slots.push_back(c.R - 1 - r + ((r % 5 == 3) ? 1000 : 0));  // some slots out of range
    c.nvalid.push_back(r % 4 == 0 ? 1 : (r % 4 == 1 ? -2 : 100));
    c.T.push_back(s.T[r]);
  }
  if ((call / 5) % 2 == 0) {
    c.nids.resize(c.R);
    c.ids.resize((size_t)c.R * c.n);
    for (int32_t r = 0; r < c.R; ++r) {
      c.nids[r] = (int32_t)(rng() % (c.n + 1)) - (r % 7 == 6 ? 3 : 0);  // some negative: clamped
      for (int32_t e = 0; e < c.n; ++e) {
        const uint64_t x = rng() % 20;
        c.ids[(size_t)r * c.n + e] = x == 0 ? -1 : (x == 1 ? c.V : (int32_t)(rng() % c.V));
      }
    }
  }
  return c;
}

struct Barrier {
  std::atomic<int> arrived{0};
  int total;
  explicit Barrier(int n) : total(n) {}
  void wait() {
    arrived.fetch_add(1);
    while (arrived.load() < total) std::this_thread::yield();
  }
};

}  // namespace

// =============================================================================================
TEST_CASE("concurrency: 4 threads x own sampler x own non-blocking stream, 50 calls in flight") {
  constexpr int kThreads = 4, kCalls = 50;
  const int32_t Vs[kThreads] = {1025, 5003, 32001, 130};
  const int32_t max_rows[kThreads] = {48, 32, 8, 64};
  Barrier ready(kThreads), finished(kThreads);
  std::mutex mu;
  SampleDiff total;
  long long stash_calls = 0, stash_bad = 0;
  vector<std::string> errors;

  auto worker = [&](int w) {
    bool failed = false;
    auto error = [&](const std::string& e) {
      failed = true;
      std::lock_guard<std::mutex> lk(mu);
      errors.push_back("thread " + std::to_string(w) + ": " + e);
    };
    const int32_t V = Vs[w];
    dds_sampler_config cfg;
    dds_sampler_config_init(&cfg, sizeof cfg);
    cfg.vocab_size = V;
    cfg.max_rows = max_rows[w];
    cfg.max_requests = max_rows[w];
    cfg.max_stash_width = 8;
    dds_sampler* cpu = nullptr;
    dds_sampler* gpu = nullptr;
    cfg.backend = DDS_BACKEND_CPU;
    dds_status st = dds_create(&cfg, &cpu);
    if (st == DDS_OK) {
      cfg.backend = DDS_BACKEND_CUDA;
      st = dds_create(&cfg, &gpu);
    }
    cudaStream_t stream = nullptr;
    if (st != DDS_OK) error(std::string("dds_create: ") + dds_last_error());
    else if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
      error("cudaStreamCreateWithFlags failed");
    // Inputs and poisoned outputs of every call, on the device before the start.
    DevMem dm;
    vector<SCase> cases(kCalls);
    vector<SOut> outs(kCalls);
    vector<dds_sample_args> args(kCalls);
    vector<TCase> tcases(kCalls);
    vector<TOut> touts(kCalls);
    vector<dds_stash_args> targs(kCalls);
    for (int k = 0; k < kCalls; ++k) {
      cases[k] = random_case(1000003ull * (uint64_t)(w + 1) + (uint64_t)k, V, max_rows[w], k);
      args[k] = bind_gpu_sample(cases[k], outs[k], dm);
      if (k % 5 == 4) {
        tcases[k] = stash_of(cases[k], 77ull * (uint64_t)k + (uint64_t)w, k);
        touts[k].poison(tcases[k]);
        TCase shell = tcases[k];
        shell.logits.clear();  // the sample call's device logits are used
        targs[k] = build_stash(shell, touts[k], [&dm](const auto& v) { return dm.up(v); });
        targs[k].logits = args[k].logits;
        targs[k].committed_tokens = args[k].tokens;  // stream-ordered after the sample call
      }
    }
    if (!dm.ok) error(dm.err);
    const bool can_run = !failed && gpu && stream;
    ready.wait();
    // All calls queued back to back, no synchronisation until the end.
    if (can_run) {
      for (int k = 0; k < kCalls; ++k) {
        st = dds_sample(gpu, &args[k], stream);
        if (st != DDS_OK) error("call " + std::to_string(k) + ": " + dds_last_error());
        if (k % 5 == 4) {
          st = dds_stash_logprobs(gpu, &targs[k], stream);
          if (st != DDS_OK) error("stash " + std::to_string(k) + ": " + dds_last_error());
        }
      }
      const cudaError_t e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) error(std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
    }
    // Nothing is freed or destroyed (cudaFree synchronises the device) before every thread's
    // work has completed.
    finished.wait();
    // Results against the CPU oracle (computed after the GPU work, in this thread).
    SampleDiff mine;
    long long my_stash_bad = 0, my_stash = 0;
    vector<std::string> stash_msgs;
    for (int k = 0; k < kCalls && can_run; ++k) {
      fetch_gpu_sample(args[k], outs[k], dm);
      SOut ref;
      std::string msg;
      if (run_cpu_sample(cpu, cases[k], ref, &msg) != DDS_OK) {
        error("cpu call " + std::to_string(k) + ": " + msg);
        continue;
      }
      mine.add(compare_sample(cases[k], ref, outs[k],
                              "thread " + std::to_string(w) + " call " + std::to_string(k)));
      if (k % 5 == 4) {
        fetch_gpu_stash(targs[k], touts[k], dm);
        TCase tc = tcases[k];
        tc.logits = cases[k].logits;
        tc.committed = outs[k].tokens;  // what the GPU stash read
        TOut tr;
        tr.poison(tc);
        dds_stash_args ta = build_stash(tc, tr, [](const auto& v) { return host_ptr(v); });
        if (dds_stash_logprobs(cpu, &ta, nullptr) != DDS_OK) {
          error(std::string("cpu stash: ") + dds_last_error());
          continue;
        }
        ++my_stash;
        my_stash_bad += compare_stash(tc, tr, touts[k],
                                      "thread " + std::to_string(w) + " stash " + std::to_string(k),
                                      &stash_msgs);
      }
    }
    if (!dm.ok) error(dm.err);
    if (stream) cudaStreamDestroy(stream);
    dds_destroy(gpu);
    dds_destroy(cpu);
    std::lock_guard<std::mutex> lk(mu);
    total.add(mine);
    stash_calls += my_stash;
    stash_bad += my_stash_bad;
    for (const auto& m : stash_msgs)
      if (total.msgs.size() < 30) total.msgs.push_back(m);
  };
  vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();

  for (const auto& e : errors) MESSAGE(e);
  for (const auto& m : total.msgs) MESSAGE(m);
  CHECK(errors.empty());
  const long long allowed = std::max<long long>(1, total.rows / 1000);  // 0.1% near-ties
  MESSAGE("concurrency: " << total.rows << " rows in " << kThreads * kCalls << " sample calls, "
                          << total.differing << " differing rows (near-ties, allowed " << allowed
                          << "), " << total.token_diff << " with another token; " << stash_calls
                          << " stash calls, " << stash_bad << " differing stash elements");
  CHECK(total.rows > 2000);
  CHECK(total.hard == 0);
  CHECK(total.differing <= allowed);
  CHECK(stash_calls == kThreads * kCalls / 5);
  CHECK(stash_bad == 0);
}

// =============================================================================================
TEST_CASE("hostile: rows of all -inf, all NaN, mixed, all banned -> token 0 and DDS_REQ_EMPTY_ROW") {
  for (int32_t V : {9, 3000, 262144}) {
    // Requests: 0 normal, 1 all -inf, 2 all NaN, 3 NaN/-inf mixed, 4 two rows (normal, -inf),
    // 5 every column NaN but the banned one, 6 normal.
    const int32_t banned = 4;
    vector<vector<float>> rows;
    rows.push_back(ramp(V, 3.f));
    rows.push_back(vector<float>(V, -kInf));
    rows.push_back(vector<float>(V, kNaN));
    vector<float> mixed(V);
    for (int32_t t = 0; t < V; ++t) mixed[t] = (t % 2) ? kNaN : -kInf;
    rows.push_back(mixed);
    rows.push_back(ramp(V, 2.f, 1.f));
    rows.push_back(vector<float>(V, -kInf));
    vector<float> only_banned(V, kNaN);
    only_banned[banned] = 5.f;
    rows.push_back(only_banned);
    rows.push_back(ramp(V, 1.f, -2.f));
    SCase c = rows_case(rows);
    c.R = 7;
    c.offs = {0, 1, 2, 3, 4, 6, 7, 8};
    c.banned = banned;
    neutral_arrays(c);
    c.K.assign(c.R, 3);
    c.P.assign(c.R, 0.5f);
    c.MP.assign(c.R, 0.5f);
    c.want_probs = V <= 3000;
    Duo d(V, 8, 8);
    for (float T : {1.f, 0.f, 1e-30f, 1e30f, 1e-40f}) {
      c.T.assign(c.R, T);
      const SOut o = both(d, c, "V " + std::to_string(V) + " T " + std::to_string(T));
      for (int32_t i : {1, 2, 3, 5, 6}) check_empty_row(c, o, i);
      CHECK(o.status[0] == 0);
      for (int32_t r : {1, 2, 3, 4, 5}) CHECK(o.status[r] == DDS_REQ_EMPTY_ROW);
      CHECK(o.status[6] == 0);
      CHECK(o.tokens[4] != banned);
      CHECK(o.argmax[0] == first_max(rows[0]));
    }
  }
}

TEST_CASE("hostile: NaN logits are -inf (never sampled, probability 0), in one block and many") {
  for (int32_t V : {40, 2500}) {
    vector<float> row = ramp(V, 4.f);
    for (int32_t t = 0; t < V; t += 3) row[t] = kNaN;
    const int32_t R = 32;
    SCase c = rows_case(vector<vector<float>>(R, row));
    neutral_arrays(c);
    for (int32_t r = 0; r < R; ++r) c.T[r] = r % 4 == 3 ? 0.f : 1.f + 0.1f * (float)(r % 4);
    Duo d(V, R, R);
    const SOut o = both(d, c, "NaN V " + std::to_string(V));
    for (int32_t i = 0; i < R; ++i) {
      CHECK(!std::isnan(row[o.tokens[i]]));
      CHECK(!std::isnan(row[o.argmax[i]]));
      bool nan_zero = true;
      for (int32_t t = 0; t < V; t += 3) nan_zero = nan_zero && o.prob(c, i, t) == 0.f;
      CHECK(nan_zero);
      CHECK(o.status[i] == 0);
    }
  }
}

TEST_CASE("hostile: +inf logits are FLT_MAX (one wins; ties in one block and across blocks)") {
  for (int32_t V : {16, 3000}) {
    vector<float> row = ramp(V, 3.f);
    const int32_t hi = V == 16 ? 11 : 2500, lo = V == 16 ? 5 : 100;
    row[hi] = kInf;
    for (float T : {1.f, 0.5f, 2.f, 1e-30f, 0.f}) {
      const int32_t R = 16;
      SCase c = rows_case(vector<vector<float>>(R, row));
      neutral_arrays(c);
      c.T.assign(R, T);
      Duo d(V, R, R);
      SOut o = both(d, c, "one +inf V " + std::to_string(V) + " T " + std::to_string(T));
      for (int32_t i = 0; i < R; ++i) {
        CHECK(o.tokens[i] == hi);
        CHECK(o.conf[i] == doctest::Approx(1.0).epsilon(1e-6));
        CHECK(o.prob(c, i, hi) == doctest::Approx(1.0).epsilon(1e-6));
        bool rest_zero = true;
        for (int32_t t = 0; t < V; ++t) rest_zero = rest_zero && (t == hi || o.prob(c, i, t) == 0.f);
        CHECK(rest_zero);
      }
      // A tie at FLT_MAX (T = 0.5: FLT_MAX * 2 = inf -> FLT_MAX again).
      vector<float> two = row;
      two[lo] = kInf;
      SCase c2 = rows_case(vector<vector<float>>(R, two));
      neutral_arrays(c2);
      c2.T.assign(R, T);
      o = both(d, c2, "two +inf V " + std::to_string(V) + " T " + std::to_string(T));
      for (int32_t i = 0; i < R; ++i) {
        CHECK((o.tokens[i] == lo || o.tokens[i] == hi));
        CHECK(o.argmax[i] == lo);  // ties: lower id
        if (T != 0.f) {
          CHECK(o.conf[i] == doctest::Approx(0.5));
          CHECK(o.margin[i] == 0.f);
          CHECK(o.ent[i] == doctest::Approx(std::log(2.0)));
        }
      }
    }
  }
}

TEST_CASE("hostile: temperatures 1e30 / FLT_MAX (uniform), 1e-30 (the argmax), denormal (greedy)") {
  const int32_t V = 1500, R = 8;  // two blocks
  const vector<float> row = ramp(V, 5.f);
  const int32_t am = first_max(row);
  Duo d(V, 64, 64);
  for (float T : {1e30f, FLT_MAX}) {
    SCase c = rows_case(vector<vector<float>>(R, row));
    neutral_arrays(c);
    c.T.assign(R, T);
    const SOut o = both(d, c, "T " + std::to_string(T));
    for (int32_t i = 0; i < R; ++i) {
      CHECK(o.conf[i] == doctest::Approx(1.0 / V).epsilon(1e-4));
      CHECK(o.ent[i] == doctest::Approx(std::log((double)V)).epsilon(1e-4));
      CHECK(o.status[i] == 0);
    }
  }
  {
    SCase c = rows_case(vector<vector<float>>(R, row));
    neutral_arrays(c);
    c.T.assign(R, 1e-30f);
    const SOut o = both(d, c, "T 1e-30");
    for (int32_t i = 0; i < R; ++i) {
      CHECK(o.tokens[i] == am);
      CHECK(o.conf[i] == doctest::Approx(1.0).epsilon(1e-6));
      CHECK(o.lp[i] == doctest::Approx(0.0));
    }
  }
  // Denormal temperatures (1/T overflows): greedy, processed stats one-hot, no flag; per-request
  // array and scalar.
  for (bool scalar : {false, true}) {
    for (float T : {1e-40f, 1e-45f, 2.9e-39f}) {
      SCase c = rows_case(vector<vector<float>>(R, row));
      neutral_arrays(c);
      if (scalar) {
        c.T.clear();
        c.temperature = T;
      } else {
        c.T.assign(R, T);
      }
      const SOut o = both(d, c, "denormal T " + std::to_string(T) + (scalar ? " scalar" : ""));
      for (int32_t i = 0; i < R; ++i) {
        CHECK(o.tokens[i] == am);
        CHECK(o.conf[i] == 1.f);
        CHECK(o.margin[i] == 1.f);
        CHECK(o.ent[i] == 0.f);
        CHECK(o.status[i] == 0);
      }
    }
  }
}

TEST_CASE("hostile: finite l whose l * (1/T) overflows to -inf stays in K0 (fuzz regression)") {
  Duo d(6, 16, 16);
  const vector<float> row = {-1e9f, -2e9f, -3e9f, -4e9f, -kInf, kNaN};
  const int32_t R = 16;
  for (int f = 0; f < 4; ++f) {
    SCase c = rows_case(vector<vector<float>>(R, row));
    neutral_arrays(c);
    c.T.assign(R, 1e-30f);
    if (f == 1) c.MP.assign(R, 0.5f);
    if (f == 2) c.P.assign(R, 0.5f);
    if (f == 3) c.K.assign(R, 2);
    const SOut o = both(d, c, "overflow to -inf, filter " + std::to_string(f));
    for (int32_t i = 0; i < R; ++i) {
      CHECK(o.tokens[i] < 4);
      CHECK(o.argmax[i] == 0);
      CHECK(o.status[i] == 0);
    }
  }
  // Huge logits at T = 0.5 overflow both ways.
  vector<vector<float>> rows = {{-3e38f, 3e38f, -3e38f, 1.f, 0.f, 0.f},
                                {-3e38f, -3e38f, -kInf, -2e38f, -kInf, -kInf},
                                {-1e9f, 1.f, -2e9f, -kInf, -kInf, -kInf}};
  SCase c = rows_case(rows);
  neutral_arrays(c);
  c.T = {0.5f, 0.5f, 1e-30f};
  c.MP = {0.9f, 0.5f, 0.1f};
  const SOut o = both(d, c, "huge logits overflow both ways");
  CHECK(o.tokens[0] == 1);
  CHECK((o.tokens[1] == 0 || o.tokens[1] == 1 || o.tokens[1] == 3));
  CHECK(o.tokens[2] == 1);
}

TEST_CASE("hostile: guidance scales that overflow (1e30, FLT_MAX, -1e30, c - u overflowing)") {
  const int32_t V = 3;
  Duo d(V, 16, 16);
  // Request r uses uncond row r: l = fmaf(g, c - u, c).
  SCase c = rows_case({{1.f, 2.f, 3.f},          // g 1e30: l = -2e30, 2, 2e30
                       {1.f, 2.f, 3.f},          // g FLT_MAX: l = -inf, 2, +inf -> FLT_MAX
                       {1e30f, 2e30f, -kInf},    // g -1e30: both columns -inf: empty
                       {3e38f, 0.f, 1.f},        // c - u = inf, g 2: +inf -> FLT_MAX
                       {1.f, 2.f, 3.f},          // g 1e30, T 0 (greedy)
                       {1.f, 2.f, 3.f}});        // g -1e30 T 1e-30
  const vector<vector<float>> u = {{3.f, 2.f, 1.f},  {3.f, 2.f, 1.f}, {-1e30f, -1e30f, 0.f},
                                   {-3e38f, 0.f, 0.f}, {3.f, 2.f, 1.f}, {3.f, 2.f, 1.f}};
  c.use_uncond = true;
  c.unrows = 6;
  c.uncond.assign(6 * V * 4, 0);
  for (int32_t i = 0; i < 6; ++i)
    for (int32_t t = 0; t < V; ++t) put_value(c.uncond, DDS_DTYPE_F32, (size_t)i * V + t, u[i][t]);
  neutral_arrays(c);
  c.uoffs = {0, 1, 2, 3, 4, 5};
  c.G = {1e30f, FLT_MAX, -1e30f, 2.f, 1e30f, -1e30f};
  c.T = {1.f, 1.f, 1.f, 1.f, 0.f, 1e-30f};
  for (uint64_t s = 0; s < 8; ++s) {
    for (auto& x : c.seeds) x = x * 31 + s;
    const SOut o = both(d, c, "overflowing guidance, seed round " + std::to_string(s));
    CHECK(o.tokens[0] == 2);
    CHECK(o.tokens[1] == 2);
    CHECK(o.prob(c, 1, 0) == 0.f);
    check_empty_row(c, o, 2);
    CHECK(o.status[2] == DDS_REQ_EMPTY_ROW);
    CHECK(o.tokens[3] == 0);
    CHECK(o.tokens[4] == 2);
    CHECK(o.tokens[5] == 0);
    for (int32_t r : {0, 1, 3, 4, 5}) CHECK(o.status[r] == 0);
  }
}

TEST_CASE("hostile: k > V, p <= 0, p > 1, min-p >= 1, and their device-side faults (flags)") {
  for (int32_t V : {10, 1500}) {
    vector<float> row = ramp(V, 2.f);
    const int32_t b0 = first_max(row), b1 = (b0 + V / 2) % V;
    row[b1] = row[b0];  // a tie at the top: the lower id is the single best token
    const int32_t best = std::min(b0, b1), tie = std::max(b0, b1);
    struct Variant {
      const char* name;
      int32_t k;
      float p, mp;
      int expect;  // 0 = same as off, 1 = the single best token, 2 = one of the tied top tokens
      int32_t flag;
    };
    const Variant vs[] = {
        {"off", 0, 1.f, 0.f, 0, 0},
        {"k = V", V, 1.f, 0.f, 0, 0},
        {"k = V + 1", V + 1, 1.f, 0.f, 0, 0},
        {"k = INT32_MAX", INT32_MAX, 1.f, 0.f, 0, 0},
        {"k = -1", -1, 1.f, 0.f, 0, DDS_REQ_BAD_TOP_K},
        {"k = INT32_MIN", INT32_MIN, 1.f, 0.f, 0, DDS_REQ_BAD_TOP_K},
        {"p = 0", 0, 0.f, 0.f, 1, 0},
        {"p = -0", 0, -0.f, 0.f, 1, 0},
        {"p = -1", 0, -1.f, 0.f, 1, 0},
        {"p = -inf", 0, -kInf, 0.f, 1, 0},
        {"p = 1e-40", 0, 1e-40f, 0.f, 1, 0},
        {"p = 1.5", 0, 1.5f, 0.f, 0, 0},
        {"p = inf", 0, kInf, 0.f, 0, 0},
        {"p = FLT_MAX", 0, FLT_MAX, 0.f, 0, 0},
        {"p = NaN", 0, kNaN, 0.f, 0, DDS_REQ_BAD_TOP_P},
        {"min-p = 1", 0, 1.f, 1.f, 2, 0},
        {"min-p = 1.5", 0, 1.f, 1.5f, 2, 0},
        {"min-p = inf", 0, 1.f, kInf, 2, 0},
        {"min-p = FLT_MAX", 0, 1.f, FLT_MAX, 2, 0},
        {"min-p = NaN", 0, 1.f, kNaN, 0, DDS_REQ_BAD_MIN_P},
        {"min-p = -0.5", 0, 1.f, -0.5f, 0, DDS_REQ_BAD_MIN_P},
        {"min-p = -inf", 0, 1.f, -kInf, 0, DDS_REQ_BAD_MIN_P},
    };
    const int32_t nv = (int32_t)(sizeof vs / sizeof vs[0]), seeds = 8, R = nv * seeds;
    SCase c = rows_case(vector<vector<float>>(R, row));
    neutral_arrays(c);
    for (int32_t v = 0; v < nv; ++v)
      for (int32_t s = 0; s < seeds; ++s) {
        const int32_t r = v * seeds + s;
        c.K[r] = vs[v].k;
        c.P[r] = vs[v].p;
        c.MP[r] = vs[v].mp;
        c.seeds[r] = 1000 + (uint64_t)s;
        c.steps[r] = 0;
      }
    Duo d(V, R, R);
    const SOut o = both(d, c, "filters V " + std::to_string(V));
    for (int32_t v = 0; v < nv; ++v)
      for (int32_t s = 0; s < seeds; ++s) {
        const int32_t r = v * seeds + s;
        INFO(vs[v].name << " V " << V << " seed " << s);
        CHECK(o.status[r] == vs[v].flag);
        if (vs[v].expect == 0) CHECK(o.tokens[r] == o.tokens[s]);  // variant 0 is "off"
        if (vs[v].expect == 1) {
          CHECK(o.tokens[r] == best);
          CHECK(o.conf[r] == doctest::Approx(1.0).epsilon(1e-6));
        }
        if (vs[v].expect == 2) CHECK((o.tokens[r] == best || o.tokens[r] == tie));
      }
  }
}

TEST_CASE("device-side faults: bad temperatures, guidance and uncond rows, sanitised and flagged") {
  const int32_t V = 1100;  // two blocks
  const vector<float> row = ramp(V, 6.f), urow = ramp(V, 3.f, 1.f);
  struct Variant {
    const char* name;
    float T, g;
    int32_t uo;     // uncond_row_offsets entry (2 rows per request)
    int expect;     // 0: as the plain request (T 1, unguided); 1: greedy; 2: as the guided one
    int32_t flag;
  };
  const int32_t unrows = 6;
  const Variant vs[] = {
      {"plain", 1.f, 0.f, -1, 0, 0},
      {"guided", 1.f, 1.5f, 2, 2, 0},
      {"T NaN", kNaN, 0.f, -1, 0, DDS_REQ_BAD_TEMPERATURE},
      {"T -1", -1.f, 0.f, -1, 0, DDS_REQ_BAD_TEMPERATURE},
      {"T -inf", -kInf, 0.f, -1, 0, DDS_REQ_BAD_TEMPERATURE},
      {"T +inf", kInf, 0.f, -1, 0, DDS_REQ_BAD_TEMPERATURE},
      {"T -1e-40", -1e-40f, 0.f, -1, 0, DDS_REQ_BAD_TEMPERATURE},
      {"T -0", -0.f, 0.f, -1, 1, 0},
      {"g NaN", 1.f, kNaN, 2, 0, DDS_REQ_BAD_GUIDANCE},
      {"g +inf", 1.f, kInf, 2, 0, DDS_REQ_BAD_GUIDANCE},
      {"g -inf", 1.f, -kInf, 2, 0, DDS_REQ_BAD_GUIDANCE},
      {"uncond start past the end", 1.f, 1.5f, unrows, 0, DDS_REQ_BAD_UNCOND_ROWS},
      {"uncond end past the end", 1.f, 1.5f, unrows - 1, 0, DDS_REQ_BAD_UNCOND_ROWS},
      {"uncond offset INT32_MAX", 1.f, 1.5f, INT32_MAX, 0, DDS_REQ_BAD_UNCOND_ROWS},
      {"uncond offset -1 (none)", 1.f, 1.5f, -1, 0, 0},
      {"uncond offset -5 (none)", 1.f, 1.5f, -5, 0, 0},
      {"bad uncond offset, g = 0", 1.f, 0.f, unrows + 3, 0, 0},
      {"uncond ok, g = 0", 1.f, 0.f, 2, 0, 0},
      {"all bad", kNaN, kInf, unrows + 1, 0, DDS_REQ_BAD_TEMPERATURE | DDS_REQ_BAD_GUIDANCE},
  };
  const int32_t nv = (int32_t)(sizeof vs / sizeof vs[0]), seeds = 4, R = nv * seeds;
  // Two rows per request, identical rows; seeds shared between variants.
  SCase c = rows_case(vector<vector<float>>(2 * R, row));
  c.R = R;
  c.offs.resize(R + 1);
  for (int32_t r = 0; r <= R; ++r) c.offs[r] = 2 * r;
  c.pos.resize(2 * R);
  for (int32_t i = 0; i < 2 * R; ++i) c.pos[i] = i % 2 ? 17 : 3;
  c.use_uncond = true;
  c.unrows = unrows;
  c.uncond.assign((size_t)unrows * V * 4, 0);
  for (int32_t i = 0; i < unrows; ++i)
    for (int32_t t = 0; t < V; ++t) put_value(c.uncond, DDS_DTYPE_F32, (size_t)i * V + t, urow[t]);
  neutral_arrays(c);
  c.uoffs.assign(R, -1);
  for (int32_t v = 0; v < nv; ++v)
    for (int32_t s = 0; s < seeds; ++s) {
      const int32_t r = v * seeds + s;
      c.T[r] = vs[v].T;
      c.G[r] = vs[v].g;
      c.uoffs[r] = vs[v].uo;
      c.seeds[r] = 50 + (uint64_t)s;
      c.steps[r] = 9;
    }
  // Every filter fault as well on the "all bad" variant.
  for (int32_t s = 0; s < seeds; ++s) {
    const int32_t r = (nv - 1) * seeds + s;
    c.K[r] = -2;
    c.P[r] = kNaN;
    c.MP[r] = kNaN;
  }
  Duo d(V, 2 * R, R);
  const SOut o = both(d, c, "device-side faults");
  const int32_t all_bad = DDS_REQ_BAD_TEMPERATURE | DDS_REQ_BAD_GUIDANCE | DDS_REQ_BAD_TOP_K |
                          DDS_REQ_BAD_TOP_P | DDS_REQ_BAD_MIN_P;
  for (int32_t v = 0; v < nv; ++v)
    for (int32_t s = 0; s < seeds; ++s) {
      const int32_t r = v * seeds + s;
      INFO(vs[v].name << " seed " << s);
      CHECK(o.status[r] == (v == nv - 1 ? all_bad : vs[v].flag));
      for (int32_t j = 0; j < 2; ++j) {
        const int32_t i = 2 * r + j, ref_plain = 2 * s + j, ref_guided = 2 * (seeds + s) + j;
        if (vs[v].expect == 0) CHECK(o.tokens[i] == o.tokens[ref_plain]);
        if (vs[v].expect == 1) CHECK(o.tokens[i] == first_max(row));
        if (vs[v].expect == 2) CHECK(o.tokens[i] == o.tokens[ref_guided]);
      }
    }
}

TEST_CASE("hostile: denormal logits (f32, bf16, f16), denormal guidance") {
  Duo d(4, 16, 16);
  {
    SCase c = rows_case({{1e-40f, -1e-40f, 0.f, 1e-45f}, {1e-40f, -1e-40f, 0.f, 1e-45f}});
    neutral_arrays(c);
    c.T = {1.f, 1e-40f};
    const SOut o = both(d, c, "denormal f32 logits");
    for (int32_t t = 0; t < 4; ++t) CHECK(o.prob(c, 0, t) == doctest::Approx(0.25));
    CHECK(o.tokens[1] == 0);  // greedy: the first maximum
  }
  for (int32_t dtype : {DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    SCase c;
    c.V = 4;
    c.rows = c.R = 2;
    c.dtype = dtype;
    const uint16_t h[8] = {0x0001, 0x8001, 0x0000, 0x0003, 0x8003, 0x8001, 0x8000, 0x0002};
    c.logits.resize(16);
    std::memcpy(c.logits.data(), h, 16);
    neutral_arrays(c);
    const SOut o = both(d, c, dtype == DDS_DTYPE_BF16 ? "bf16 subnormals" : "f16 subnormals");
    CHECK(o.argmax[0] == 3);
    CHECK(o.argmax[1] == 3);
  }
  {
    // A row of 3000 subnormals (every kernel path: full vectors and a tail).
    const int32_t V = 3000;
    Duo d2(V, 4, 4);
    vector<float> r(V);
    for (int32_t t = 0; t < V; ++t) r[t] = (float)((t * 13) % 97 - 48) * 1e-41f;
    SCase c = rows_case({r, r});
    neutral_arrays(c);
    c.T = {1.f, 0.f};
    const SOut o = both(d2, c, "subnormal row V 3000");
    CHECK(o.tokens[1] == first_max(r));
    CHECK(o.ent[0] == doctest::Approx(std::log((double)V)).epsilon(1e-4));
  }
  {
    // Denormal guidance scale: the request is guided and l = fmaf(1e-40, c - u, c) ~ c.
    const vector<float> cr = ramp(4, 3.f);
    SCase c = rows_case({cr});
    c.use_uncond = true;
    c.unrows = 1;
    c.uncond.assign(16, 0);
    for (int32_t t = 0; t < 4; ++t) put_value(c.uncond, DDS_DTYPE_F32, t, 100.f);
    neutral_arrays(c);
    c.G = {1e-40f};
    c.T = {0.f};
    c.uoffs = {0};
    const SOut o = both(d, c, "denormal guidance");
    CHECK(o.tokens[0] == first_max(cr));
    CHECK(o.status[0] == 0);
  }
}

TEST_CASE("hostile: a mixed batch at V = 32001 (bf16) with every hostile row and request") {
  const int32_t V = 32001;
  std::mt19937_64 rng(31337);
  std::normal_distribution<float> nd(0.f, 3.f);
  const int32_t R = 12;
  vector<vector<float>> rows(R, vector<float>(V));
  for (auto& r : rows)
    for (float& x : r) x = nd(rng);
  std::fill(rows[1].begin(), rows[1].end(), -kInf);
  for (int32_t t = 0; t < V; t += 5) rows[2][t] = kNaN;
  rows[3][20000] = kInf;
  rows[4][100] = kInf;
  rows[4][31000] = kInf;
  for (float& x : rows[5]) x *= 1e-39f;  // bf16 subnormals
  std::fill(rows[6].begin(), rows[6].end(), kNaN);
  rows[6][V - 1] = 1.f;  // only the last column (a tail element) is finite
  SCase c = rows_case(rows, DDS_DTYPE_BF16);
  neutral_arrays(c);
  c.T = {1.f, 1.f, 0.7f, 1.f, 1.f, 1.f, 1.f, kNaN, 1e-40f, 1e30f, 1e-30f, 1.f};
  c.K = {0, 0, 50, 0, 0, V + 7, 0, -4, 0, 0, 3, 0};
  c.P = {1.f, 0.5f, 0.9f, 1.f, 1.f, 1.f, -2.f, kNaN, 1.f, 0.5f, 1.f, 0.f};
  c.MP = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, -1.f, 0.f, 0.f, 0.f, 3.f};
  c.probs_dtype = DDS_DTYPE_BF16;
  Duo d(V, R, R);
  const SOut o = both(d, c, "mixed batch V 32001");
  CHECK(o.status[1] == DDS_REQ_EMPTY_ROW);
  check_empty_row(c, o, 1);
  CHECK(o.tokens[3] == 20000);
  CHECK((o.tokens[4] == 100 || o.tokens[4] == 31000));
  CHECK(o.argmax[4] == 100);
  CHECK(o.tokens[6] == V - 1);
  CHECK(o.status[7] ==
        (DDS_REQ_BAD_TEMPERATURE | DDS_REQ_BAD_TOP_K | DDS_REQ_BAD_TOP_P | DDS_REQ_BAD_MIN_P));
  CHECK(o.tokens[8] == o.argmax[8]);
  // T = 1e-30 and min-p >= 1: a token of the top value (bf16 rows may tie at the top).
  auto l = [&](int32_t i, int32_t t) { return get_value(c.logits, c.dtype, (size_t)i * V + t); };
  CHECK(l(10, o.tokens[10]) == l(10, o.argmax[10]));
  CHECK(l(11, o.tokens[11]) == l(11, o.argmax[11]));
  for (int32_t r : {0, 2, 3, 4, 5, 6, 8, 9, 10, 11}) CHECK(o.status[r] == 0);
}

// =============================================================================================
TEST_CASE("debug mode: bad device-side values are DDS_ERR_INVALID_VALUE naming the request") {
  const int32_t V = 8, R = 4;
  Duo d(V, 16, 16, 20, DDS_FLAG_DEBUG_CHECKS);
  cudaStream_t st;
  REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
  SCase base = rows_case(vector<vector<float>>(R, ramp(V, 2.f)));
  base.use_uncond = true;
  base.unrows = R;
  base.uncond.assign((size_t)R * V * 4, 0);
  neutral_arrays(base);
  base.uoffs.assign(R, -1);
  struct Case {
    const char* name;
    int which;
    float f;
    int32_t i;
  };
  const Case cases[] = {{"temperatures", 0, kNaN, 0},     {"temperatures", 0, -1.f, 0},
                        {"temperatures", 0, kInf, 0},     {"temperatures", 0, -kInf, 0},
                        {"guidance_scales", 1, kNaN, 0},  {"guidance_scales", 1, kInf, 0},
                        {"guidance_scales", 1, -kInf, 0}, {"top_ks", 2, 0.f, -1},
                        {"top_ks", 2, 0.f, INT32_MIN},    {"top_ps", 3, kNaN, 0},
                        {"min_ps", 4, kNaN, 0},           {"min_ps", 4, -0.25f, 0},
                        {"uncond_row_offsets", 5, 1.f, R}, {"uncond_row_offsets", 5, 1.f, INT32_MAX}};
  for (const Case& cs : cases) {
    for (int32_t bad_r : {0, 2, R - 1}) {
      INFO(cs.name << " request " << bad_r);
      SCase c = base;
      if (cs.which == 0) c.T[bad_r] = cs.f;
      if (cs.which == 1) c.G[bad_r] = cs.f;
      if (cs.which == 2) c.K[bad_r] = cs.i;
      if (cs.which == 3) c.P[bad_r] = cs.f;
      if (cs.which == 4) c.MP[bad_r] = cs.f;
      if (cs.which == 5) {
        c.G[bad_r] = cs.f;
        c.uoffs[bad_r] = cs.i;
      }
      DevMem dm;
      SOut o;
      dds_sample_args a = bind_gpu_sample(c, o, dm);
      REQUIRE(dm.ok);
      const dds_status s = dds_sample(d.gpu, &a, st);
      const std::string msg = dds_last_error();
      INFO(msg);
      CHECK(s == DDS_ERR_INVALID_VALUE);
      CHECK(contains(msg, cs.name));
      CHECK(contains(msg, "request " + std::to_string(bad_r)));
      DDS_CUDA_CHECK(cudaStreamSynchronize(st));
      SOut back = o;  // poisoned host copy; download what the device holds
      fetch_gpu_sample(a, back, dm);
      REQUIRE(dm.ok);
      CHECK(back.tokens == o.tokens);
      CHECK(back.status == o.status);
      CHECK(back.probs == o.probs);
      CHECK(std::memcmp(back.lp.data(), o.lp.data(), o.lp.size() * 4) == 0);
      // The CPU backend in debug mode says the same.
      SOut oc;
      std::string cmsg;
      CHECK(run_cpu_sample(d.cpu, c, oc, &cmsg) == DDS_ERR_INVALID_VALUE);
      CHECK(contains(cmsg, "request " + std::to_string(bad_r)));
    }
  }
  // Values documented as valid pass the debug checks (k > V, p <= 0, p > 1, min_p > 1, denormal
  // T, an out-of-range uncond offset of an unguided request); outputs match the CPU.
  {
    SCase c = base;
    c.T.assign(R, 1e-40f);
    c.K.assign(R, V + 100);
    c.P = {0.f, -1.f, 2.f, 1.f};
    c.MP = {0.f, 1.f, 5.f, 0.f};
    c.uoffs = {R + 5, -1, -3, 0};
    c.G = {0.f, 0.f, 2.f, 0.f};
    const SOut o = both(d, c, "debug mode, odd but valid values");
    for (int32_t r = 0; r < R; ++r) CHECK(o.status[r] == 0);
  }
  // Device row offsets that break the layout rule: DDS_ERR_INVALID_VALUE (debug mode reads them
  // back; outside debug mode they are flagged DDS_REQ_BAD_ROW_OFFSETS: test_gpu_hostile.cu).
  {
    SCase c = base;
    c.rows = 4;
    for (const vector<int32_t>& offs :
         {vector<int32_t>{0, 2, 1, 3, 4}, vector<int32_t>{0, 1, 2, 3, 9}, vector<int32_t>{1, 1, 2, 3, 4}}) {
      c.offs = offs;
      DevMem dm;
      SOut o;
      dds_sample_args a = bind_gpu_sample(c, o, dm);
      REQUIRE(dm.ok);
      const dds_status s = dds_sample(d.gpu, &a, st);
      INFO(dds_last_error());
      CHECK(s == DDS_ERR_INVALID_VALUE);
      CHECK(contains(dds_last_error(), "row_offsets"));
      DDS_CUDA_CHECK(cudaStreamSynchronize(st));
    }
  }
  // Stash in debug mode: bad slots, temperatures and id counts name the request.
  {
    TCase t;
    t.V = V;
    t.rows = t.R = R;
    t.logits = base.logits;
    t.n = 3;
    t.num_slots = R;
    t.rows_per_slot = 1;
    t.slots = {0, 1, 2, 3};
    t.T.assign(R, 1.f);
    t.ids.assign((size_t)R * t.n, 1);
    t.nids.assign(R, 2);
    struct SC {
      const char* name;
      int which;
      int32_t i;
      float f;
    };
    for (const SC& sc : {SC{"slots", 0, -1, 0.f}, SC{"slots", 0, R, 0.f}, SC{"temperatures", 1, 0, kNaN},
                         SC{"temperatures", 1, 0, -2.f}, SC{"num_token_ids", 2, 4, 0.f},
                         SC{"num_token_ids", 2, -1, 0.f}}) {
      for (int32_t bad_r : {1, R - 1}) {
        INFO("stash " << sc.name << " request " << bad_r);
        TCase c = t;
        if (sc.which == 0) c.slots[bad_r] = sc.i;
        if (sc.which == 1) c.T[bad_r] = sc.f;
        if (sc.which == 2) c.nids[bad_r] = sc.i;
        DevMem dm;
        TOut o;
        o.poison(c);
        dds_stash_args a = build_stash(c, o, [&dm](const auto& v) { return dm.up(v); });
        REQUIRE(dm.ok);
        const dds_status s = dds_stash_logprobs(d.gpu, &a, st);
        const std::string msg = dds_last_error();
        INFO(msg);
        CHECK(s == DDS_ERR_INVALID_VALUE);
        CHECK(contains(msg, sc.name));
        CHECK(contains(msg, "request " + std::to_string(bad_r)));
        DDS_CUDA_CHECK(cudaStreamSynchronize(st));
        TOut back = o;
        fetch_gpu_stash(a, back, dm);
        REQUIRE(dm.ok);
        CHECK(back.tok == o.tok);
        CHECK(back.rank == o.rank);
        CHECK(back.status == o.status);
      }
    }
  }
  cudaStreamDestroy(st);
}

// =============================================================================================
TEST_CASE("host pointers given to the CUDA backend are refused, naming the argument") {
  const int32_t V = 64, R = 2;
  Duo d(V, 8, 8);
  SCase c = rows_case(vector<vector<float>>(R, ramp(V, 2.f)));
  c.use_uncond = true;
  c.unrows = R;
  c.uncond.assign((size_t)R * V * 4, 0);
  neutral_arrays(c);
  c.uoffs = {0, 1};
  c.offs = {0, 1, 2};
  c.pos = {0, 1};
  // A pinned host buffer, large enough for any one argument.
  void* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, (size_t)R * V * 4 * 2) == cudaSuccess);
  std::memset(pinned, 0, (size_t)R * V * 4 * 2);
  vector<uint8_t> pageable((size_t)R * V * 4 * 2 + 64, 0);
  const char* names[] = {"row_offsets", "positions", "logits", "uncond_logits",
                         "uncond_row_offsets", "guidance_scales", "temperatures", "top_ks",
                         "top_ps", "min_ps", "seeds", "steps", "tokens", "logprobs", "argmax",
                         "confidence", "margin", "entropy", "probs", "request_status"};
  for (int which = 0; which < 20; ++which) {
    for (bool use_pinned : {false, true}) {
      INFO("args->" << names[which] << (use_pinned ? " (pinned)" : " (pageable)"));
      DevMem dm;
      SOut o;
      dds_sample_args a = bind_gpu_sample(c, o, dm);
      REQUIRE(dm.ok);
      void* h = use_pinned ? pinned : (void*)(((uintptr_t)pageable.data() + 63) & ~(uintptr_t)63);
      const void** in_ptrs[] = {(const void**)&a.row_offsets,    (const void**)&a.positions,
                                (const void**)&a.logits,         (const void**)&a.uncond_logits,
                                (const void**)&a.uncond_row_offsets,
                                (const void**)&a.guidance_scales, (const void**)&a.temperatures,
                                (const void**)&a.top_ks,         (const void**)&a.top_ps,
                                (const void**)&a.min_ps,         (const void**)&a.seeds,
                                (const void**)&a.steps,          (const void**)&a.tokens,
                                (const void**)&a.logprobs,       (const void**)&a.argmax,
                                (const void**)&a.confidence,     (const void**)&a.margin,
                                (const void**)&a.entropy,        (const void**)&a.probs,
                                (const void**)&a.request_status};
      const void* saved = *in_ptrs[which];
      *in_ptrs[which] = h;
      const dds_status s = dds_sample(d.gpu, &a, nullptr);
      const std::string msg = dds_last_error();
      INFO(msg);
      CHECK(s == DDS_ERR_INVALID_ARGUMENT);
      CHECK(contains(msg, std::string("args->") + names[which] + " "));
      DDS_CUDA_CHECK(cudaDeviceSynchronize());
      *in_ptrs[which] = saved;  // nothing was queued: every device output is still poisoned
      SOut back = o;
      fetch_gpu_sample(a, back, dm);
      REQUIRE(dm.ok);
      CHECK(back.tokens == o.tokens);
      CHECK(back.argmax == o.argmax);
      CHECK(back.status == o.status);
      CHECK(back.probs == o.probs);
      CHECK(std::memcmp(back.ent.data(), o.ent.data(), o.ent.size() * 4) == 0);
    }
  }
  // Stash: every pointer.
  {
    TCase t;
    t.V = V;
    t.rows = t.R = R;
    t.logits = c.logits;
    t.offs = {0, 1, 2};
    t.keep = {1, 1};
    t.slots = {1, 0};
    t.nvalid = {1, 1};
    t.T = {1.f, 1.f};
    t.committed = {3, 4};
    t.ids.assign((size_t)R * t.n, 2);
    t.nids = {1, 3};
    t.num_slots = 2;
    const char* snames[] = {"row_offsets", "logits", "keep", "slots", "num_valid", "temperatures",
                            "committed_tokens", "token_ids", "num_token_ids", "out_token_ids",
                            "out_logprobs", "out_ranks", "request_status"};
    for (int which = 0; which < 13; ++which) {
      INFO("stash args->" << snames[which]);
      DevMem dm;
      TOut o;
      o.poison(t);
      dds_stash_args a = build_stash(t, o, [&dm](const auto& v) { return dm.up(v); });
      REQUIRE(dm.ok);
      void* h = (void*)(((uintptr_t)pageable.data() + 63) & ~(uintptr_t)63);
      const void** ps[] = {(const void**)&a.row_offsets,   (const void**)&a.logits,
                           (const void**)&a.keep,          (const void**)&a.slots,
                           (const void**)&a.num_valid,     (const void**)&a.temperatures,
                           (const void**)&a.committed_tokens, (const void**)&a.token_ids,
                           (const void**)&a.num_token_ids, (const void**)&a.out_token_ids,
                           (const void**)&a.out_logprobs,  (const void**)&a.out_ranks,
                           (const void**)&a.request_status};
      const void* saved = *ps[which];
      *ps[which] = h;
      const dds_status s = dds_stash_logprobs(d.gpu, &a, nullptr);
      const std::string msg = dds_last_error();
      INFO(msg);
      CHECK(s == DDS_ERR_INVALID_ARGUMENT);
      CHECK(contains(msg, std::string("args->") + snames[which] + " "));
      DDS_CUDA_CHECK(cudaDeviceSynchronize());
      *ps[which] = saved;
      TOut back = o;
      fetch_gpu_stash(a, back, dm);
      REQUIRE(dm.ok);
      CHECK(back.tok == o.tok);
      CHECK(back.rank == o.rank);
      CHECK(back.status == o.status);
    }
  }
  cudaFreeHost(pinned);
  // Managed memory is accepted and gives the CPU's result.
  {
    float* ml = nullptr;
    int32_t* mt = nullptr;
    REQUIRE(cudaMallocManaged(&ml, (size_t)V * 4) == cudaSuccess);
    REQUIRE(cudaMallocManaged(&mt, 4) == cudaSuccess);
    const vector<float> r = ramp(V, 2.f);
    std::memcpy(ml, r.data(), (size_t)V * 4);
    *mt = kPoisonI;
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = a.num_requests = 1;
    a.logits = ml;
    a.tokens = mt;
    a.temperature = 0.f;
    const dds_status s = dds_sample(d.gpu, &a, nullptr);
    INFO(dds_last_error());
    CHECK(s == DDS_OK);
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(*mt == first_max(r));
    cudaFree(ml);
    cudaFree(mt);
  }
}

// =============================================================================================
TEST_CASE("stash hostile: all -inf / NaN rows, +inf, huge values, bad slots, ids and tokens out of range") {
  for (int32_t V : {6, 2000}) {
    // Rows: 0 NaN/+inf/finite, 1 all -inf/NaN, 2 huge +-3e38, 3 denormals, 4 normal, 5 normal,
    // 6 all -inf, 7 normal. Requests of 1-2 rows.
    std::mt19937_64 rng(V);
    std::normal_distribution<float> nd(0.f, 2.f);
    vector<vector<float>> rows(8, vector<float>(V));
    for (auto& r : rows)
      for (float& x : r) x = nd(rng);
    for (int32_t t = 0; t < V; ++t) {
      rows[0][t] = t % 3 == 0 ? kNaN : rows[0][t];
      rows[1][t] = t % 2 ? -kInf : kNaN;
      rows[2][t] = t % 4 == 0 ? -3e38f : (t % 4 == 1 ? 3e38f : rows[2][t]);
      rows[3][t] = (float)((t * 7) % 11 - 5) * 1e-41f;
      rows[6][t] = -kInf;
    }
    rows[0][1] = kInf;
    rows[5][V - 1] = kInf;
    rows[5][V / 2] = kInf;
    SCase sc = rows_case(rows);
    TCase c;
    c.V = V;
    c.rows = 8;
    c.logits = sc.logits;
    c.offs = {0, 1, 2, 4, 5, 6, 7, 8};  // request 2 owns rows 2-3
    c.R = 7;
    c.n = 4;
    c.num_slots = 5;
    c.rows_per_slot = 2;
    c.keep = {1, 1, 1, 1, 1, 0, 1};
    c.slots = {0, 1, 2, -1, 5, 3, INT32_MAX};  // requests 3, 4, 6: bad slots (6 is kept too)
    c.nvalid = {5, 1, 2, 1, 1, 1, 1};
    c.committed = {0, V, -1, INT32_MIN, 2, INT32_MAX, 1, V - 1};
    c.ids.assign((size_t)c.R * c.n, 0);
    c.nids = {0, 2, 4, 0, 0, 0, 0};
    const int32_t ids1[4] = {-5, V, 1, 1}, ids2[4] = {V - 1, 0, INT32_MAX, V + 1};
    for (int32_t e = 0; e < c.n; ++e) {
      c.ids[(size_t)1 * c.n + e] = ids1[e];
      c.ids[(size_t)2 * c.n + e] = ids2[e];
    }
    Duo d(V, 16, 16, 20);
    for (float T : {1.f, kNaN, -1.f, kInf, 1e-40f, 0.f, 0.5f, 1e-30f}) {
      for (int32_t mode : {0, 1}) {
        for (bool with_ids : {false, true}) {
          for (bool with_committed : {false, true}) {
            TCase t = c;
            t.T.assign(t.R, T);
            t.logits_mode = mode;
            if (!with_ids) {
              t.ids.clear();
              t.nids.clear();
            }
            if (!with_committed) t.committed.clear();
            const std::string what = "stash V " + std::to_string(V) + " T " + std::to_string(T) +
                                     " mode " + std::to_string(mode) + " ids " +
                                     std::to_string(with_ids) + " committed " +
                                     std::to_string(with_committed);
            const TOut o = stash_both(d, t, what);
            INFO(what);
            const bool bad_T = std::isnan(T) || T < 0.f || std::isinf(T);
            for (int32_t r : {3, 4, 6}) CHECK(o.status[r] == DDS_REQ_BAD_SLOT);
            // Requests 1 and 2 read ids / committed tokens outside [0, V): DDS_REQ_BAD_TOKEN_ID.
            const int32_t tb = with_ids || with_committed ? DDS_REQ_BAD_TOKEN_ID : 0;
            for (int32_t r : {0, 1, 2})
              CHECK(o.status[r] == ((bad_T ? DDS_REQ_BAD_TEMPERATURE : 0) | (r > 0 ? tb : 0)));
            CHECK(o.status[5] == 0);  // not kept: status cleared, outputs untouched
            // Slot 3 belongs to request 5 (not kept) and slot 4 to nobody: untouched.
            const size_t E = (size_t)t.n + 1, per_slot = (size_t)t.rows_per_slot * E;
            for (size_t e = 3 * per_slot; e < 5 * per_slot; ++e) {
              CHECK(o.tok[e] == kPoisonI);
              CHECK(is_poison(o.val[e]));
            }
            // Row 1 (all -inf / NaN) without ids: entry 0 is token 0 (or the committed token) at
            // -inf, padding is token 0 at -inf rank 0.
            const size_t b1 = 1 * per_slot;
            if (!with_ids)
              for (size_t e = 1; e < E; ++e) {
                CHECK(o.tok[b1 + e] == 0);
                CHECK(o.val[b1 + e] == -kInf);
                CHECK(o.rank[b1 + e] == 0);
              }
            CHECK(o.val[b1] == -kInf);
            // Out-of-range committed tokens are written as given with -inf and rank 0.
            if (with_committed) {
              CHECK(o.tok[b1] == V);
              CHECK(o.rank[b1] == 0);
              CHECK(o.tok[2 * per_slot] == -1);
              CHECK(o.val[2 * per_slot] == -kInf);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("stash hostile: out-of-range num_token_ids and num_valid are clamped like the CPU") {
  const int32_t V = 300, R = 6;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> nd(0.f, 2.f);
  vector<vector<float>> rows(2 * R, vector<float>(V));
  for (auto& r : rows)
    for (float& x : r) x = std::round(nd(rng) * 2.f) / 2.f;  // many ties
  SCase sc = rows_case(rows, DDS_DTYPE_F16);
  TCase c;
  c.V = V;
  c.rows = 2 * R;
  c.R = R;
  c.dtype = DDS_DTYPE_F16;
  c.logits = sc.logits;
  c.offs.resize(R + 1);
  for (int32_t r = 0; r <= R; ++r) c.offs[r] = 2 * r;
  c.n = 5;
  c.num_slots = R;
  c.rows_per_slot = 2;
  c.slots = {5, 4, 3, 2, 1, 0};
  c.nvalid = {-1, 0, 1, 2, 3, INT32_MAX};
  c.ids.resize((size_t)R * c.n);
  for (auto& x : c.ids) x = (int32_t)(rng() % (V + 10)) - 5;
  c.nids = {-3, 0, 2, 5, 6, INT32_MAX};
  Duo d(V, 16, 16, 8);
  for (int32_t mode : {0, 1}) {
    c.logits_mode = mode;
    const TOut o = stash_both(d, c, "clamping, mode " + std::to_string(mode));
    // num_token_ids outside [0, n] (requests 0, 4, 5) and used ids outside [0, V) are flagged.
    for (int32_t r = 0; r < R; ++r) {
      const int32_t k = std::max(0, std::min(c.nids[r], c.n));
      int32_t want = (c.nids[r] < 0 || c.nids[r] > c.n) ? DDS_REQ_BAD_NUM_TOKEN_IDS : 0;
      for (int32_t e = 0; e < k; ++e) {
        const int32_t t = c.ids[(size_t)r * c.n + e];
        if (t < 0 || t >= V) want |= DDS_REQ_BAD_TOKEN_ID;
      }
      CHECK(o.status[r] == want);
    }
    // Requests 0 and 1 write no rows: their slots (5, 4) stay poisoned.
    const size_t per_slot = (size_t)c.rows_per_slot * (c.n + 1);
    for (size_t e = 4 * per_slot; e < 6 * per_slot; ++e) CHECK(o.tok[e] == kPoisonI);
  }
}
