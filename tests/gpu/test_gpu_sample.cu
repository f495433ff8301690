// GPU tests of dds_sample (CUDA backend) against the CPU backend (the oracle, docs/sampling.md):
// parity sweep over vocab sizes, row counts, dtypes, strides, mixed per-request settings,
// guidance, banned token, -inf / NaN columns, positions, both stats modes, probs in f32/bf16/f16,
// request_status, allowed-token masks; statistical tests on the GPU (chi-square, rare tail); batch
// invariance; graph capture and replay with new per-request values.
#include "gpu_main.h"  // first: doctest implementation + main that skips without a device

#include <dds/dds.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu/test_util.h"
#include "dtype.h"
#include "sample/plan.h"
#include "testing.h"

namespace {

using tu::kInf;

// ---------------------------------------------------------------------------------------------
struct Problem {
  int32_t V = 0, rows = 0, R = 0, dtype = 0;
  int64_t stride = 0, ustride = 0;
  int32_t unrows = 0;
  std::vector<uint8_t> logits, uncond;  // raw bytes in dtype
  std::vector<int32_t> offs, pos, uoffs;
  std::vector<float> T, G, P, MP;
  std::vector<int32_t> K;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
  bool use_pos = false, use_uncond = false;
  int32_t banned = -1, stats = DDS_STATS_PROCESSED;
  bool want_probs = false;
  int32_t probs_dtype = DDS_DTYPE_F32;
  int64_t probs_stride = 0;
  std::vector<int32_t> mask;  // allowed-token masks [R, mask_stride] (empty: none)
  int64_t mask_stride = 0;
};

struct Results {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, conf, margin, entropy, probs;  // probs as float, [rows, V]
};

size_t esz(int32_t dt) { return dt == DDS_DTYPE_F32 ? 4 : 2; }

void put_value(std::vector<uint8_t>& raw, int32_t dt, size_t idx, float v) {
  if (dt == DDS_DTYPE_F32) {
    std::memcpy(&raw[idx * 4], &v, 4);
  } else {
    const uint16_t h = dt == DDS_DTYPE_BF16 ? dds::f32_to_bf16(v) : dds::f32_to_f16(v);
    std::memcpy(&raw[idx * 2], &h, 2);
  }
}
float get_value(const std::vector<uint8_t>& raw, int32_t dt, size_t idx) {
  if (dt == DDS_DTYPE_F32) {
    float v;
    std::memcpy(&v, &raw[idx * 4], 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, &raw[idx * 2], 2);
  return dt == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
}

dds_sampler* make_sampler(int32_t backend, int32_t V, int32_t max_rows, int32_t max_requests) {
  dds_sampler_config c;
  REQUIRE(dds_sampler_config_init(&c, sizeof c) == DDS_OK);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = max_rows;
  c.max_requests = max_requests;
  dds_sampler* s = nullptr;
  const dds_status st = dds_create(&c, &s);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  return s;
}

// Host or device copies of the problem's arrays.
struct Bound {
  bool device;
  std::vector<void*> allocs;
  explicit Bound(bool d) : device(d) {}
  ~Bound() {
    if (device)
      for (void* p : allocs) cudaFree(p);
  }
  template <class T>
  T* put(const std::vector<T>& v) {
    if (v.empty()) return nullptr;
    if (!device) return const_cast<T*>(v.data());
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, v.size() * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
    allocs.push_back(p);
    return static_cast<T*>(p);
  }
};

// Outputs: poisoned buffers (tokens -7, floats NaN, probs all-ones bytes = NaN in every dtype).
struct OutBufs {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, conf, margin, entropy;
  std::vector<uint8_t> probs;
};

Results run(dds_sampler* s, const Problem& pb, bool device, cudaStream_t stream = nullptr) {
  Bound b(device);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OutBufs o;
  o.tokens.assign(pb.rows, -7);
  o.argmax.assign(pb.rows, -7);
  o.status.assign(pb.R, -7);
  o.logprobs.assign(pb.rows, nan);
  o.conf.assign(pb.rows, nan);
  o.margin.assign(pb.rows, nan);
  o.entropy.assign(pb.rows, nan);
  const int64_t ps = pb.probs_stride ? pb.probs_stride : pb.V;
  if (pb.want_probs) o.probs.assign((size_t)pb.rows * ps * esz(pb.probs_dtype), 0xff);
  dds_sample_args a;
  REQUIRE(dds_sample_args_init(&a, sizeof a) == DDS_OK);
  a.num_rows = pb.rows;
  a.num_requests = pb.R;
  a.row_offsets = b.put(pb.offs);
  a.positions = pb.use_pos ? b.put(pb.pos) : nullptr;
  a.logits = b.put(pb.logits);
  a.dtype = pb.dtype;
  a.row_stride = pb.stride;
  if (pb.use_uncond) {
    a.uncond_logits = b.put(pb.uncond);
    a.uncond_row_stride = pb.ustride;
    a.uncond_num_rows = pb.unrows;
    a.uncond_row_offsets = b.put(pb.uoffs);
  }
  a.guidance_scales = b.put(pb.G);
  a.temperatures = b.put(pb.T);
  a.top_ks = b.put(pb.K);
  a.top_ps = b.put(pb.P);
  a.min_ps = b.put(pb.MP);
  a.seeds = b.put(pb.seeds);
  a.steps = b.put(pb.steps);
  a.banned_token = pb.banned;
  a.stats = pb.stats;
  a.tokens = b.put(o.tokens);
  a.argmax = b.put(o.argmax);
  a.logprobs = b.put(o.logprobs);
  a.confidence = b.put(o.conf);
  a.margin = b.put(o.margin);
  a.entropy = b.put(o.entropy);
  a.request_status = b.put(o.status);
  if (pb.want_probs) {
    a.probs = b.put(o.probs);
    a.probs_dtype = pb.probs_dtype;
    a.probs_row_stride = ps;
  }
  if (!pb.mask.empty()) {
    a.allowed_token_masks = b.put(pb.mask);
    a.allowed_mask_stride = pb.mask_stride;
  }
  const dds_status st = dds_sample(s, &a, stream);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  if (device) {
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    auto back = [](auto& v, const void* p) {
      REQUIRE(cudaMemcpy(v.data(), p, v.size() * sizeof(v[0]), cudaMemcpyDeviceToHost) ==
              cudaSuccess);
    };
    back(o.tokens, a.tokens);
    back(o.argmax, a.argmax);
    back(o.logprobs, a.logprobs);
    back(o.conf, a.confidence);
    back(o.margin, a.margin);
    back(o.entropy, a.entropy);
    back(o.status, a.request_status);
    if (pb.want_probs) back(o.probs, a.probs);
  }
  Results r;
  r.tokens = o.tokens;
  r.argmax = o.argmax;
  r.status = o.status;
  r.logprobs = o.logprobs;
  r.conf = o.conf;
  r.margin = o.margin;
  r.entropy = o.entropy;
  if (pb.want_probs) {
    r.probs.resize((size_t)pb.rows * pb.V);
    for (int32_t i = 0; i < pb.rows; ++i)
      for (int32_t t = 0; t < pb.V; ++t)
        r.probs[(size_t)i * pb.V + t] = get_value(o.probs, pb.probs_dtype, (size_t)i * ps + t);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Problem generator: ragged requests with a rotating mix of settings.
Problem make_problem(int32_t V, int32_t rows, int32_t dtype, uint64_t seed, int64_t pad,
                     bool use_pos, int32_t stats, bool probs, int32_t probs_dtype) {
  std::mt19937_64 rng(seed);
  Problem pb;
  pb.V = V;
  pb.rows = rows;
  pb.dtype = dtype;
  pb.stride = V + pad;
  pb.use_pos = use_pos;
  pb.stats = stats;
  pb.want_probs = probs;
  pb.probs_dtype = probs_dtype;
  pb.probs_stride = probs ? V + (pad ? 5 : 0) : 0;
  pb.banned = V > 3 ? 3 : -1;
  // ragged requests of 1..4 rows
  pb.offs.push_back(0);
  while (pb.offs.back() < rows) {
    int32_t n = 1 + (int32_t)(rng() % 4);
    n = std::min(n, rows - pb.offs.back());
    pb.offs.push_back(pb.offs.back() + n);
  }
  pb.R = (int32_t)pb.offs.size() - 1;
  pb.use_uncond = true;
  pb.unrows = rows + 3;
  pb.ustride = V + (pad ? 1 : 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int32_t r = 0; r < pb.R; ++r) {
    const int32_t n = pb.offs[r + 1] - pb.offs[r];
    float T = 1.f, g = 0.f, p = 1.f, mp = 0.f;
    int32_t k = 0, uo = -1;
    switch (r % 13) {
      case 0: break;
      case 1: T = 0.f; break;
      case 2: T = 0.7f; g = 1.5f; uo = pb.offs[r]; break;
      case 3: k = 50; break;
      case 4: T = 1.3f; p = 0.9f; break;
      case 5: mp = 0.05f; break;
      case 6: T = 0.8f; k = 20; p = 0.8f; mp = 0.02f; g = -0.5f; uo = pb.offs[r] + 2; break;
      case 7: p = 0.f; break;
      case 8: T = 2.f; p = 0.5f; g = 2.f; uo = -1; break;
      case 9: T = nan; k = -3; p = nan; mp = -1.f; g = kInf; uo = 0; break;
      case 10: T = 0.5f; g = 1.f; uo = pb.unrows - n + 1; break;  // out of range: flagged
      case 11: T = 1e-39f; g = 3.f; uo = pb.offs[r]; break;       // 1/T overflows: greedy
      case 12: T = 1.f; k = 1 + (int32_t)(rng() % 3000); p = 0.95f; break;
    }
    pb.T.push_back(T);
    pb.G.push_back(g);
    pb.P.push_back(p);
    pb.MP.push_back(mp);
    pb.K.push_back(k);
    pb.uoffs.push_back(uo);
    pb.seeds.push_back(rng());
    pb.steps.push_back((uint32_t)(rng() % 100));
  }
  for (int32_t i = 0; i < rows; ++i) pb.pos.push_back((int32_t)(rng() % 100000));
  pb.logits.assign((size_t)rows * pb.stride * esz(dtype), 0);
  pb.uncond.assign((size_t)pb.unrows * pb.ustride * esz(dtype), 0);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  const float sigmas[4] = {1.f, 2.f, 4.f, 8.f};
  for (int32_t i = 0; i < rows; ++i) {
    const float sg = sigmas[rng() % 4];
    const bool empty = rows >= 3 && i == rows / 2;
    const bool ties = i % 7 == 5;  // coarse values: many exact ties
    for (int64_t t = 0; t < pb.stride; ++t) {
      float v = sg * nd(rng);
      if (ties) v = std::round(v * 2.f) / 2.f;
      const float u = ud(rng);
      if (t < V) {
        if (u < 0.01f) v = -kInf;
        else if (u < 0.012f) v = nan;
        if (empty) v = (t % 2) ? -kInf : nan;
      } else {
        v = 1e30f;  // padding: must never be read
      }
      put_value(pb.logits, dtype, (size_t)i * pb.stride + t, v);
    }
  }
  for (int32_t i = 0; i < pb.unrows; ++i)
    for (int64_t t = 0; t < pb.ustride; ++t) {
      float v = 2.f * nd(rng);
      if (ud(rng) < 0.005f) v = -kInf;
      put_value(pb.uncond, dtype, (size_t)i * pb.ustride + t, t < V ? v : 1e30f);
    }
  return pb;
}

bool close(float g, float c, double rel = 1e-5, double abs_tol = 1e-6) {
  if (std::isnan(g) || std::isnan(c)) return false;
  if (g == c) return true;  // also equal infinities
  if (std::isinf(g) || std::isinf(c)) return false;
  return std::fabs((double)g - (double)c) <= rel * std::fabs((double)c) + abs_tol;
}

struct Tally {
  long long rows = 0, bad_rows = 0, token_diff = 0;
};
Tally g_tally;

// Compares GPU against CPU; returns the number of rows that differ (near-ties).
int compare(const Problem& pb, const Results& cpu, const Results& gpu, const char* what) {
  int bad = 0, printed = 0;
  for (int32_t r = 0; r < pb.R; ++r) {
    INFO(what << " request " << r);
    CHECK(gpu.status[r] == cpu.status[r]);
  }
  double prel = 1e-5, pabs = 1e-6;
  if (pb.probs_dtype == DDS_DTYPE_BF16) prel = 1.0 / 128, pabs = 1e-6;
  if (pb.probs_dtype == DDS_DTYPE_F16) prel = 1.0 / 1024, pabs = 1e-7;
  for (int32_t i = 0; i < pb.rows; ++i) {
    CHECK(gpu.argmax[i] == cpu.argmax[i]);
    bool ok = gpu.tokens[i] == cpu.tokens[i];
    if (!ok) ++g_tally.token_diff;
    ok = ok && close(gpu.logprobs[i], cpu.logprobs[i]) && close(gpu.conf[i], cpu.conf[i]) &&
         close(gpu.margin[i], cpu.margin[i]) && close(gpu.entropy[i], cpu.entropy[i]);
    if (pb.want_probs && ok)
      for (int32_t t = 0; t < pb.V && ok; ++t)
        ok = close(gpu.probs[(size_t)i * pb.V + t], cpu.probs[(size_t)i * pb.V + t], prel, pabs);
    if (!ok) {
      ++bad;
      if (printed++ < 5)
        MESSAGE(what << " row " << i << ": token " << gpu.tokens[i] << " vs " << cpu.tokens[i]
                     << ", logprob " << gpu.logprobs[i] << " vs " << cpu.logprobs[i] << ", conf "
                     << gpu.conf[i] << " vs " << cpu.conf[i] << ", margin " << gpu.margin[i]
                     << " vs " << cpu.margin[i] << ", entropy " << gpu.entropy[i] << " vs "
                     << cpu.entropy[i]);
    }
  }
  g_tally.rows += pb.rows;
  g_tally.bad_rows += bad;
  return bad;
}

void parity(int32_t V, int32_t rows, int32_t dtype, uint64_t seed, int64_t pad, bool use_pos,
            int32_t stats, bool probs, int32_t probs_dtype) {
  char what[256];
  std::snprintf(what, sizeof what, "V=%d rows=%d dtype=%d pad=%lld pos=%d stats=%d probs=%d/%d", V,
                rows, dtype, (long long)pad, (int)use_pos, stats, (int)probs, probs_dtype);
  Problem pb = make_problem(V, rows, dtype, seed, pad, use_pos, stats, probs, probs_dtype);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  const Results rc = run(cpu, pb, false);
  const Results rg = run(gpu, pb, true);
  const int bad = compare(pb, rc, rg, what);
  // Near-ties only: at most 0.1% of the rows (rounded down), plus one on the larger sweeps.
  const int allowed = rows / 1000 + (rows >= 257 ? 1 : 0);
  MESSAGE(what << ": " << bad << " differing rows (allowed " << allowed << ")");
  CHECK(bad <= allowed);
  // A second call on the same sampler must give identical results (counters reset, no state).
  const Results rg2 = run(gpu, pb, true);
  CHECK(rg2.tokens == rg.tokens);
  CHECK(std::memcmp(rg2.logprobs.data(), rg.logprobs.data(), rg.logprobs.size() * 4) == 0);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

// Filtered rows that exercise both paths of the CUDA backend: the candidates of the streaming
// pass (peaked rows, small k, min-p) and the exact fallback (flat rows, wide nuclei, k = 1024 on
// sigma-2 rows, ties beyond a list's capacity), with ties at the thresholds, -inf columns, the
// banned token, guidance and unfiltered / greedy rows mixed into one batch (one row per request).
Problem make_filter_problem(int32_t V, int32_t rows, int32_t dtype, uint64_t seed, int32_t stats,
                            bool probs) {
  std::mt19937_64 rng(seed);
  Problem pb;
  pb.V = V;
  pb.rows = rows;
  pb.R = rows;
  pb.dtype = dtype;
  pb.stride = V;
  pb.use_pos = true;
  pb.stats = stats;
  pb.want_probs = probs;
  pb.probs_dtype = DDS_DTYPE_F32;
  pb.banned = V > 3 ? 3 : -1;
  pb.use_uncond = true;
  pb.unrows = rows;
  pb.ustride = V;
  for (int32_t r = 0; r <= rows; ++r) pb.offs.push_back(r);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  pb.logits.assign((size_t)rows * V * esz(dtype), 0);
  pb.uncond.assign((size_t)rows * V * esz(dtype), 0);
  for (int32_t r = 0; r < rows; ++r) {
    float T = 1.f, g = 0.f, p = 1.f, mp = 0.f, sigma = 2.f;
    int32_t k = 0, uo = -1;
    int kind = 0;  // 0 gaussian, 1 flat (all equal), 2 coarse ties, 3 sparse (few finite),
                   // 4 many ties at the maximum
    switch (r % 18) {
      case 0: k = 50; break;
      case 1: k = 1; break;
      case 2: k = 1024; break;
      case 3: p = 0.9f; sigma = 8.f; break;
      case 4: p = 0.9f; kind = 1; break;
      case 5: mp = 0.05f; break;
      case 6: T = 0.7f; k = 50; p = 0.9f; mp = 0.02f; break;
      case 7: T = 1.3f; p = 0.5f; sigma = 4.f; break;
      case 8: k = 20; kind = 2; break;
      case 9: p = 0.f; kind = 4; break;
      case 10: k = V - 1; break;
      case 11: mp = 0.9f; sigma = 8.f; break;
      case 12: p = 0.9f; sigma = 4.f; break;
      case 13: T = 0.8f; k = 5; g = 1.5f; uo = r; break;
      case 14: break;
      case 15: T = 0.f; k = 50; break;
      case 16: k = 50; p = 0.95f; kind = 3; break;
      case 17: k = 3; mp = 0.1f; kind = 4; break;
    }
    pb.T.push_back(T);
    pb.G.push_back(g);
    pb.P.push_back(p);
    pb.MP.push_back(mp);
    pb.K.push_back(k);
    pb.uoffs.push_back(uo);
    pb.seeds.push_back(rng());
    pb.steps.push_back((uint32_t)(rng() % 100));
    pb.pos.push_back((int32_t)(rng() % 100000));
    for (int32_t t = 0; t < V; ++t) {
      float v = sigma * nd(rng);
      if (kind == 1) v = 0.25f;
      if (kind == 2) v = std::round(v * 2.f) / 2.f;
      if (kind == 3) v = (rng() % 5000 == 0 || t == V / 2) ? v : -kInf;
      if (kind == 4) v = (t % 3 == 0) ? 5.f : std::min(v, 4.f);
      if (kind != 3 && ud(rng) < 0.01f) v = -kInf;
      put_value(pb.logits, dtype, (size_t)r * V + t, v);
      put_value(pb.uncond, dtype, (size_t)r * V + t, 2.f * nd(rng));
    }
  }
  return pb;
}

// Allowed-token masks for every request of pb (a stride of 2 spare words): each column allowed
// with probability `density`; request r % 11 == 4 all zero (DDS_REQ_EMPTY_ROW), r % 11 == 7
// columns 0..31 only.
void add_masks(Problem& pb, uint64_t seed, float density) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  const int64_t words = (pb.V + 31) / 32;
  pb.mask_stride = words + 2;
  pb.mask.assign((size_t)pb.R * pb.mask_stride, 0);
  for (int32_t r = 0; r < pb.R; ++r) {
    int32_t* m = pb.mask.data() + (size_t)r * pb.mask_stride;
    for (int64_t w = 0; w < pb.mask_stride; ++w) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b)
        if (ud(rng) < density) bits |= 1u << b;
      m[w] = (int32_t)bits;
    }
    if (r % 11 == 4)
      for (int64_t w = 0; w < words; ++w) m[w] = 0;
    if (r % 11 == 7)
      for (int64_t w = 0; w < words; ++w) m[w] = w == 0 ? -1 : 0;
  }
}

// Masked problems: the default plan and forced plans that take every kernel family (plain pass
// and its finishes, small kernels, candidates and split finish, direct filter, probs) against the
// CPU; every token of a row that is not empty allowed by its request's mask.
void mask_parity(Problem pb, const char* what) {
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, pb.V, pb.rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, pb.V, pb.rows, pb.R);
  const Results rc = run(cpu, pb, false);
  int empty = 0;
  for (int32_t r = 0; r < pb.R; ++r) {
    const int32_t* m = pb.mask.data() + (size_t)r * pb.mask_stride;
    if (rc.status[r] & DDS_REQ_EMPTY_ROW) ++empty;
    for (int32_t i = pb.offs[r]; i < pb.offs[r + 1]; ++i) {
      const int32_t t = rc.tokens[i];
      if (!(rc.status[r] & DDS_REQ_EMPTY_ROW)) CHECK(((uint32_t)m[t >> 5] >> (t & 31)) & 1u);
    }
  }
  CHECK(empty > 0);
  const char* plans[] = {"",           "small_plain=0,fuse=1", "small_plain=0,fuse=0",
                         "cta=0",      "exact_all=1",          "small_filter=0",
                         "top2=0",     "smem_row=0",           "split=1",
                         "direct=1",   "direct=1,smem_row=0"};
  const int allowed = pb.rows / 1000 + (pb.rows >= 257 ? 1 : 0);
  for (const char* text : plans) {
    dds::ksample::SamplePlanOverrides o;
    const char* err = nullptr;
    REQUIRE(dds::ksample::parse_plan_overrides(text, &o, &err));
    REQUIRE(dds::testing::set_sample_plan(gpu, o) == DDS_OK);
    const Results rg = run(gpu, pb, true);
    char w2[320];
    std::snprintf(w2, sizeof w2, "%s plan '%s'", what, text);
    const int bad = compare(pb, rc, rg, w2);
    MESSAGE(w2 << ": " << bad << " differing rows (allowed " << allowed << ")");
    CHECK(bad <= allowed);
  }
  dds_destroy(cpu);
  dds_destroy(gpu);
}

void filter_parity(int32_t V, int32_t rows, int32_t dtype, uint64_t seed, int32_t stats,
                   bool probs) {
  char what[256];
  std::snprintf(what, sizeof what, "filters V=%d rows=%d dtype=%d stats=%d probs=%d", V, rows,
                dtype, stats, (int)probs);
  Problem pb = make_filter_problem(V, rows, dtype, seed, stats, probs);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  const Results rc = run(cpu, pb, false);
  const Results rg = run(gpu, pb, true);
  const int bad = compare(pb, rc, rg, what);
  const int allowed = rows / 1000 + (rows >= 257 ? 1 : 0);
  MESSAGE(what << ": " << bad << " differing rows (allowed " << allowed << ")");
  CHECK(bad <= allowed);
  // Again on the same sampler (fallback list and counters reset), then a subset of the rows in
  // another order of requests: identical tokens (no state, batch invariance).
  const Results rg2 = run(gpu, pb, true);
  CHECK(rg2.tokens == rg.tokens);
  CHECK(std::memcmp(rg2.logprobs.data(), rg.logprobs.data(), rg.logprobs.size() * 4) == 0);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

}  // namespace

TEST_CASE("parity: small shapes (V = 1, 7, 1025; rows 1, 3, 257; every dtype)") {
  uint64_t seed = 1;
  for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    parity(1, 3, dt, seed++, 0, false, DDS_STATS_PROCESSED, true, dt);
    parity(7, 257, dt, seed++, 3, true, DDS_STATS_PROCESSED, true, (dt + 1) % 3);
    parity(7, 1, dt, seed++, 0, false, DDS_STATS_GUIDED, false, 0);
    parity(1025, 257, dt, seed++, dt == 0 ? 4 : 8, dt == 1, DDS_STATS_PROCESSED, true, dt);
    parity(1025, 3, dt, seed++, 1, true, DDS_STATS_GUIDED, true, (dt + 2) % 3);
  }
}

TEST_CASE("sanitizer: small mixed batches (both filter paths, every kernel)") {
  // Small enough for compute-sanitizer racecheck; V = 5000 takes the filter kernel's
  // candidate path (top-k) and its whole-row path (top-p / min-p), V = 1025 the all-candidates one.
  parity(1025, 40, DDS_DTYPE_BF16, 301, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F32);
  parity(5000, 40, DDS_DTYPE_F32, 302, 3, false, DDS_STATS_PROCESSED, true, DDS_DTYPE_BF16);
  parity(5000, 27, DDS_DTYPE_F16, 303, 0, true, DDS_STATS_GUIDED, true, DDS_DTYPE_F16);
  // 1024 rows of 17 blocks: two warps per row in the pass, the warp-per-row finish kernel (the
  // fused finish of such rows, through the per-row counters: the launch plans test below).
  parity(17000, 1024, DDS_DTYPE_BF16, 304, 0, false, DDS_STATS_PROCESSED, false, 0);
}

TEST_CASE("parity: 1024+ rows of many blocks (several pass warps per row, warp-per-row finish)") {
  parity(32001, 1536, DDS_DTYPE_BF16, 210, 0, true, DDS_STATS_PROCESSED, false, 0);
  parity(40000, 1024, DDS_DTYPE_F32, 211, 5, false, DDS_STATS_GUIDED, true, DDS_DTYPE_BF16);
  parity(151936, 1100, DDS_DTYPE_BF16, 212, 0, true, DDS_STATS_PROCESSED, false, 0);
}

TEST_CASE("parity: 4096 rows x 1025") {
  parity(1025, 4096, DDS_DTYPE_BF16, 101, 0, true, DDS_STATS_PROCESSED, false, 0);
  parity(1025, 4096, DDS_DTYPE_F32, 102, 0, false, DDS_STATS_GUIDED, true, DDS_DTYPE_BF16);
}

TEST_CASE("parity: large vocabularies (32001, 126464, 151936, 262144)") {
  parity(32001, 257, DDS_DTYPE_F32, 201, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F32);
  parity(32001, 64, DDS_DTYPE_BF16, 202, 7, false, DDS_STATS_GUIDED, false, 0);
  parity(32001, 64, DDS_DTYPE_F16, 203, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F16);
  parity(126464, 13, DDS_DTYPE_BF16, 204, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_BF16);
  parity(151936, 13, DDS_DTYPE_F32, 205, 16, false, DDS_STATS_PROCESSED, false, 0);
  parity(151936, 13, DDS_DTYPE_F16, 206, 0, true, DDS_STATS_GUIDED, true, DDS_DTYPE_F32);
  parity(262144, 13, DDS_DTYPE_F32, 207, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_F32);
  parity(262144, 13, DDS_DTYPE_BF16, 208, 3, false, DDS_STATS_GUIDED, false, 0);
  parity(262144, 1, DDS_DTYPE_BF16, 209, 0, true, DDS_STATS_PROCESSED, true, DDS_DTYPE_BF16);
  MESSAGE("parity totals so far: " << g_tally.rows << " rows, " << g_tally.bad_rows
                                   << " differing rows (near-ties), " << g_tally.token_diff
                                   << " with a different token");
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("statistics: chi-square on the GPU (1e5 draws, V = 2100, plain and filtered)") {
  // One request of `chunk` rows: positions 0..chunk-1 key the draws, the step advances per call.
  const int32_t V = 2100, n = 102400, chunk = 4096;
  std::mt19937_64 rng(77);
  const std::vector<float> c = tu::random_row(rng, V, 2.f);
  struct Cfg {
    float T;
    int32_t k;
    float p, mp;
    const char* name;
  } cfgs[] = {{1.f, 0, 1.f, 0.f, "plain"},
              {0.8f, 200, 1.f, 0.f, "top-k 200"},
              {1.f, 0, 0.9f, 0.f, "top-p 0.9"},
              {1.2f, 0, 1.f, 0.05f, "min-p 0.05"},
              {1.f, 100, 0.8f, 0.01f, "top-k 100 + top-p 0.8 + min-p 0.01"}};
  dds_sampler* s = make_sampler(DDS_BACKEND_CUDA, V, chunk, 1);
  std::vector<float> rowsv((size_t)chunk * V);
  for (int32_t j = 0; j < chunk; ++j) std::copy(c.begin(), c.end(), rowsv.begin() + (size_t)j * V);
  float* d_l = nullptr;
  int32_t *d_tok = nullptr, *d_offs = nullptr;
  REQUIRE(cudaMalloc(&d_l, rowsv.size() * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_tok, chunk * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_offs, 8) == cudaSuccess);
  const int32_t offs_h[2] = {0, chunk};
  REQUIRE(cudaMemcpy(d_offs, offs_h, 8, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_l, rowsv.data(), rowsv.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<int32_t> tok(chunk);
  for (const Cfg& cf : cfgs) {
    std::vector<long long> counts(V, 0);
    for (int32_t done = 0, step = 0; done < n; done += chunk, ++step) {
      dds_sample_args a;
      dds_sample_args_init(&a, sizeof a);
      a.num_rows = chunk;
      a.num_requests = 1;
      a.row_offsets = d_offs;  // one request: positions 0..chunk-1
      a.logits = d_l;
      a.temperature = cf.T;
      a.top_k = cf.k;
      a.top_p = cf.p;
      a.min_p = cf.mp;
      a.seed = 0x5eed;
      a.step = (uint32_t)step;
      a.tokens = d_tok;
      REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
      REQUIRE(cudaMemcpy(tok.data(), d_tok, chunk * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
      for (int32_t t : tok) {
        REQUIRE(t >= 0);
        REQUIRE(t < V);
        ++counts[t];
      }
    }
    tu::RefParams q;
    q.T = cf.T;
    q.k = cf.k;
    q.p = cf.p;
    q.min_p = cf.mp;
    const std::vector<long double> pr = tu::ref_processed(c, q);
    long long tot = 0;
    for (long long x : counts) tot += x;
    int df = 0;
    long long outside = 0;
    const double stat = tu::chi_square(counts, pr, tot, &df, &outside);
    const double crit = tu::chi2_critical_1e6(df);
    MESSAGE(std::string(cf.name) << ": n = " << tot << ", chi2 = " << stat << " (df " << df << ", crit " << crit
                    << "), outside the kept set: " << outside);
    CHECK(outside == 0);
    CHECK(stat < crit);
  }
  cudaFree(d_l);
  cudaFree(d_tok);
  cudaFree(d_offs);
  dds_destroy(s);
}

TEST_CASE("statistics: rare tail on the GPU (V = 262144, ~30 expected hits in 4000 draws)") {
  const int32_t V = 262144, D = 4000, chunk = 250;
  const double tail_mass = 0.0075, n_tail = V - 1;
  const double w = tail_mass / (1 - tail_mass) / n_tail;
  const float L = (float)std::log(w);
  const double wf = std::exp((double)L);
  const double p_tail = n_tail * wf / (1 + n_tail * wf);
  const double expected = D * p_tail, sigma = std::sqrt(D * p_tail * (1 - p_tail));
  const double lo = expected - 4 * sigma, hi = expected + 4 * sigma;
  dds_sampler* s = make_sampler(DDS_BACKEND_CUDA, V, chunk, 1);
  std::vector<float> lg((size_t)chunk * V, L);
  for (int j = 0; j < chunk; ++j) lg[(size_t)j * V] = 0.f;
  float* d_l = nullptr;
  int32_t *d_tok = nullptr, *d_offs = nullptr;
  REQUIRE(cudaMalloc(&d_l, lg.size() * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_tok, chunk * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&d_offs, 8) == cudaSuccess);
  const int32_t offs_h[2] = {0, chunk};
  REQUIRE(cudaMemcpy(d_offs, offs_h, 8, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(d_l, lg.data(), lg.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  std::vector<int32_t> tok(chunk);
  long long hits = 0;
  for (int32_t step = 0; step * chunk < D; ++step) {
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = chunk;
    a.num_requests = 1;
    a.row_offsets = d_offs;
    a.logits = d_l;
    a.seed = 0x7a11;
    a.step = (uint32_t)step;
    a.tokens = d_tok;
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    REQUIRE(cudaMemcpy(tok.data(), d_tok, chunk * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int32_t t : tok) hits += t != 0;
  }
  MESSAGE("rare tail (GPU): " << hits << " tail hits, expected " << expected << " +- " << sigma
                              << " (window [" << lo << ", " << hi << "])");
  CHECK(hits >= lo);
  CHECK(hits <= hi);
  cudaFree(d_l);
  cudaFree(d_tok);
  cudaFree(d_offs);
  dds_destroy(s);
}

// Request r of a batch as a batch of its own: its rows (and positions), its parameters; its
// uncond rows stay where they are (uncond_row_offsets keeps pointing at them).
Problem request_alone(const Problem& big, int32_t r) {
  const int32_t b = big.offs[r], e = big.offs[r + 1], n = e - b;
  Problem one = big;  // then cut down to the request
  one.rows = n;
  one.R = 1;
  one.offs = {0, n};
  if (!big.pos.empty()) one.pos.assign(big.pos.begin() + b, big.pos.begin() + e);
  const size_t row_bytes = (size_t)big.stride * esz(big.dtype);
  one.logits.assign(big.logits.begin() + b * row_bytes, big.logits.begin() + e * row_bytes);
  for (auto* v : {&one.T, &one.G, &one.P, &one.MP}) *v = {(*v)[r]};
  one.K = {big.K[r]};
  one.seeds = {big.seeds[r]};
  one.steps = {big.steps[r]};
  one.uoffs = {big.uoffs[r]};
  return one;
}

TEST_CASE("batch invariance: a request alone and inside a large mixed batch") {
  // 200 rows: the same kernels alone and in the batch. 1100 rows of 40 blocks: the batch's
  // unfiltered rows are finished by a warp per row, a request alone by a CTA per row (both add
  // the block terms in the same order: identical statistics, not only tokens).
  const std::pair<int32_t, int32_t> shapes[] = {{32001, 200}, {40000, 1100}};
  for (const auto& shape : shapes) {
  const int32_t V = shape.first, rows = shape.second;
  CAPTURE(V);
  Problem big = make_problem(V, rows, DDS_DTYPE_BF16, 9090, 0, true, DDS_STATS_PROCESSED, false, 0);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, big.R);
  const Results rb = run(gpu, big, true);
  int checked = 0;
  for (int32_t r : {0, 2, 3, 4, 6, 12, 16, 17}) {
    if (r >= big.R) continue;
    const int32_t b = big.offs[r], n = big.offs[r + 1] - b;
    const Results ro = run(gpu, request_alone(big, r), true);
    for (int32_t j = 0; j < n; ++j) {
      INFO("request " << r << " row " << j);
      CHECK(ro.tokens[j] == rb.tokens[b + j]);
      CHECK(ro.argmax[j] == rb.argmax[b + j]);
      CHECK(ro.logprobs[j] == rb.logprobs[b + j]);
      CHECK(ro.entropy[j] == rb.entropy[b + j]);
      ++checked;
    }
    CHECK(ro.status[0] == rb.status[r]);
  }
  CHECK(checked > 8);
  dds_destroy(gpu);
  }
}

TEST_CASE("batch invariance past 256 blocks: the CTA finish's chunked terms") {
  // V = 263168 (257 blocks): a row alone is finished by a CTA that adds its block terms in two
  // chunks of 256 blocks, the same row in a batch of 1024 by a warp per row; both must add in
  // the same order (bit-identical logprob / entropy), in both statistics modes. Unguided,
  // unfiltered bf16 rows (a fast generator: the size, not the distribution, is the point).
  const int32_t V = 263168, rows = 1024;
  Problem big;
  big.V = V;
  big.rows = rows;
  big.R = rows;
  big.dtype = DDS_DTYPE_BF16;
  big.stride = V;
  for (int32_t r = 0; r <= rows; ++r) big.offs.push_back(r);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int32_t r = 0; r < rows; ++r) {
    big.T.push_back(r % 3 == 0 ? 0.7f : 1.f);
    big.G.push_back(0.f);
    big.P.push_back(1.f);
    big.MP.push_back(0.f);
    big.K.push_back(0);
    big.uoffs.push_back(-1);
    big.seeds.push_back(next());
    big.steps.push_back((uint32_t)(next() % 100));
  }
  big.logits.assign((size_t)rows * V * 2, 0);
  for (size_t i = 0; i < (size_t)rows * V; ++i) {
    const uint64_t b = next();  // ~ N(0, 2): a sum of four uniforms, scaled
    const float v = ((float)(b & 0xffff) + (float)((b >> 16) & 0xffff) + (float)((b >> 32) & 0xffff) +
                     (float)(b >> 48) - 131070.f) * (2.f / 37837.f);
    put_value(big.logits, DDS_DTYPE_BF16, i, v);
  }
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, rows);
  for (int32_t stats : {DDS_STATS_PROCESSED, DDS_STATS_GUIDED}) {
    CAPTURE(stats);
    big.stats = stats;
    const Results rb = run(gpu, big, true);
    for (int32_t r : {0, 1, 2, 511, 1023}) {
      INFO("row " << r);
      const Results ro = run(gpu, request_alone(big, r), true);  // (one row per request)
      CHECK(ro.tokens[0] == rb.tokens[r]);
      CHECK(ro.argmax[0] == rb.argmax[r]);
      CHECK(ro.logprobs[0] == rb.logprobs[r]);
      CHECK(ro.entropy[0] == rb.entropy[r]);
      CHECK(ro.conf[0] == rb.conf[r]);
    }
  }
  dds_destroy(gpu);
}

TEST_CASE("graph capture: replay with new seeds, steps and temperatures in device arrays") {
  const int32_t V = 5000, rows = 64;
  Problem pb = make_problem(V, rows, DDS_DTYPE_F32, 4242, 0, true, DDS_STATS_PROCESSED, true,
                            DDS_DTYPE_F32);
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, pb.R);
  cudaStream_t st;
  REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
  // Device copies that stay alive across the replays.
  Bound b(true);
  std::vector<int32_t> tokens(rows, -7), status(pb.R, -7);
  std::vector<float> lp(rows), probs((size_t)rows * V);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = pb.R;
  a.row_offsets = b.put(pb.offs);
  a.positions = b.put(pb.pos);
  a.logits = b.put(pb.logits);
  a.uncond_logits = b.put(pb.uncond);
  a.uncond_num_rows = pb.unrows;
  a.uncond_row_stride = pb.ustride;
  a.uncond_row_offsets = b.put(pb.uoffs);
  a.guidance_scales = b.put(pb.G);
  float* d_T = b.put(pb.T);
  uint64_t* d_seeds = b.put(pb.seeds);
  uint32_t* d_steps = b.put(pb.steps);
  a.temperatures = d_T;
  a.seeds = d_seeds;
  a.steps = d_steps;
  a.top_ks = b.put(pb.K);
  a.top_ps = b.put(pb.P);
  a.min_ps = b.put(pb.MP);
  a.banned_token = pb.banned;
  a.tokens = b.put(tokens);
  a.logprobs = b.put(lp);
  a.probs = b.put(probs);
  a.request_status = b.put(status);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess);
  const dds_status s1 = dds_sample(gpu, &a, st);
  REQUIRE(cudaStreamEndCapture(st, &graph) == cudaSuccess);
  REQUIRE(s1 == DDS_OK);
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  std::mt19937_64 rng(5);
  for (int rep = 0; rep < 4; ++rep) {
    for (int32_t r = 0; r < pb.R; ++r) {
      pb.seeds[r] = rng();
      pb.steps[r] = (uint32_t)(rng() % 1000);
      if (!std::isnan(pb.T[r]) && pb.T[r] > 0.01f) pb.T[r] = 0.5f + (float)(rng() % 100) / 50.f;
    }
    REQUIRE(cudaMemcpy(d_T, pb.T.data(), pb.R * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(d_seeds, pb.seeds.data(), pb.R * 8, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(d_steps, pb.steps.data(), pb.R * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemset(a.tokens, 0xff, rows * 4) == cudaSuccess);
    REQUIRE(cudaMemset(a.logprobs, 0xff, rows * 4) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, st) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(st) == cudaSuccess);
    REQUIRE(cudaMemcpy(tokens.data(), a.tokens, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(lp.data(), a.logprobs, rows * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(cudaMemcpy(probs.data(), a.probs, probs.size() * 4, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    pb.want_probs = true;
    const Results rc = run(cpu, pb, false);
    int bad = 0;
    for (int32_t i = 0; i < rows; ++i) {
      bool ok = tokens[i] == rc.tokens[i] && close(lp[i], rc.logprobs[i]);
      for (int32_t t = 0; t < V && ok; ++t)
        ok = close(probs[(size_t)i * V + t], rc.probs[(size_t)i * V + t]);
      bad += !ok;
    }
    MESSAGE("graph replay " << rep << ": " << bad << " differing rows");
    CHECK(bad == 0);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

TEST_CASE("parity: filtered rows through the candidates and the fallback (mixed batches)") {
  uint64_t seed = 900;
  for (int32_t dt : {DDS_DTYPE_F32, DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
    filter_parity(1025, 72, dt, seed++, DDS_STATS_PROCESSED, true);
    filter_parity(5000, 36, dt, seed++, DDS_STATS_GUIDED, false);
    filter_parity(32001, 36, dt, seed++, DDS_STATS_PROCESSED, dt == DDS_DTYPE_F32);
  }
  filter_parity(262144, 36, DDS_DTYPE_BF16, seed++, DDS_STATS_PROCESSED, false);
  filter_parity(151936, 36, DDS_DTYPE_F32, seed++, DDS_STATS_GUIDED, true);
  filter_parity(7, 36, DDS_DTYPE_F32, seed++, DDS_STATS_PROCESSED, true);
  filter_parity(262144, 300, DDS_DTYPE_F32, seed++, DDS_STATS_PROCESSED, false);
}

TEST_CASE("allowed-token masks: CUDA equal to the CPU on every kernel family") {
  struct Shape {
    int32_t V, rows, dtype, stats;
    float density;
  };
  const Shape shapes[] = {{1025, 44, DDS_DTYPE_F32, DDS_STATS_GUIDED, 0.7f},
                          {1025, 44, DDS_DTYPE_BF16, DDS_STATS_PROCESSED, 0.02f},
                          {2048, 300, DDS_DTYPE_BF16, DDS_STATS_PROCESSED, 0.5f},
                          {5000, 40, DDS_DTYPE_F16, DDS_STATS_PROCESSED, 0.7f},
                          {40000, 22, DDS_DTYPE_F32, DDS_STATS_GUIDED, 0.02f},
                          {151936, 13, DDS_DTYPE_BF16, DDS_STATS_PROCESSED, 0.7f},
                          {262144, 8, DDS_DTYPE_F32, DDS_STATS_PROCESSED, 0.001f}};
  for (const Shape& sh : shapes) {
    char what[160];
    std::snprintf(what, sizeof what, "masks V=%d rows=%d dtype=%d stats=%d density=%g", sh.V,
                  sh.rows, sh.dtype, sh.stats, sh.density);
    Problem pb = make_filter_problem(sh.V, sh.rows, sh.dtype, 700 + sh.V, sh.stats, true);
    add_masks(pb, 800 + sh.V, sh.density);
    mask_parity(pb, what);
  }
  // Ragged requests, padded rows, positions, probs in bf16 (make_problem's mix).
  Problem pb = make_problem(32001, 257, DDS_DTYPE_BF16, 750, 3, true, DDS_STATS_PROCESSED, true,
                            DDS_DTYPE_BF16);
  add_masks(pb, 751, 0.7f);
  mask_parity(pb, "masks ragged V=32001 rows=257 bf16");
}

// Every plan computes the same bits (kernels/sample/plan.h): the default plan's outputs against
// each forced choice of the launch plan (the internal hook, src/testing.h), byte for byte. The
// direct filter path sums a row's statistics in another order: tokens and argmax exact there,
// statistics within the parity tolerance.
TEST_CASE("launch plans: every forced kernel choice gives the default plan's outputs") {
  struct Shape {
    int32_t V, rows, dtype, stats;
  };
  const Shape shapes[] = {{1025, 40, DDS_DTYPE_F32, DDS_STATS_GUIDED},
                          {2048, 300, DDS_DTYPE_BF16, DDS_STATS_PROCESSED},
                          {5000, 40, DDS_DTYPE_BF16, DDS_STATS_PROCESSED},
                          {40000, 22, DDS_DTYPE_F32, DDS_STATS_PROCESSED},
                          {17000, 1030, DDS_DTYPE_F16, DDS_STATS_GUIDED},
                          {151936, 8, DDS_DTYPE_BF16, DDS_STATS_GUIDED},
                          {262144, 8, DDS_DTYPE_F32, DDS_STATS_PROCESSED}};
  // (split=1 is refused above kSplitMaxRows rows: the 1030-row shape keeps the warp finish)
  const char* plans[] = {"cta=0", "cta=1", "small_plain=0", "small_plain=0,fuse=1",
                         "small_plain=0,fuse=0", "small_filter=0", "exact_all=1", "top2=0",
                         "top2=1", "fbpw=1", "fbpw=3", "bpw=1", "bpw=4", "cf_wpc=1",
                         "smem_row=0", "filter_grid=1", "split=0", "split=1",
                         "split=1,top2=0", "small_filter=0,split=1", "direct=1"};
  for (const Shape& sh : shapes) {
    Problem pb = make_filter_problem(sh.V, sh.rows, sh.dtype, 900 + sh.V, sh.stats, true);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, sh.V, sh.rows, pb.R);
    const Results ref = run(gpu, pb, true);
    for (const char* text : plans) {
      dds::ksample::SamplePlanOverrides o;
      const char* err = nullptr;
      REQUIRE(dds::ksample::parse_plan_overrides(text, &o, &err));
      REQUIRE(dds::testing::set_sample_plan(gpu, o) == DDS_OK);
      const Results got = run(gpu, pb, true);
      INFO("V=" << sh.V << " rows=" << sh.rows << " dtype=" << sh.dtype << " plan " << text);
      CHECK(got.tokens == ref.tokens);
      CHECK(got.argmax == ref.argmax);
      CHECK(got.status == ref.status);
      if (std::strcmp(text, "direct=1") == 0) {
        CHECK(compare(pb, ref, got, text) == 0);
      } else {
        CHECK(std::memcmp(got.logprobs.data(), ref.logprobs.data(), 4 * ref.logprobs.size()) == 0);
        CHECK(std::memcmp(got.conf.data(), ref.conf.data(), 4 * ref.conf.size()) == 0);
        CHECK(std::memcmp(got.margin.data(), ref.margin.data(), 4 * ref.margin.size()) == 0);
        CHECK(std::memcmp(got.entropy.data(), ref.entropy.data(), 4 * ref.entropy.size()) == 0);
        CHECK(std::memcmp(got.probs.data(), ref.probs.data(), 4 * ref.probs.size()) == 0);
      }
    }
    REQUIRE(dds::testing::set_sample_plan(gpu, dds::ksample::SamplePlanOverrides{}) == DDS_OK);
    dds_destroy(gpu);
  }
}
