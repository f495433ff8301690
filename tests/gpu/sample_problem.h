// Shared by the GPU tests (test_gpu_sample.cu, test_gpu_mask.cu; the dtype helpers, the sampler
// and the host / device arrays also by test_gpu_stash.cu and reliability_common.h): a problem
// (mixed requests, guidance, -inf / NaN columns, optional allowed-token masks) run on a sampler of
// either backend with host or device arrays, the generators of mixed and filtered batches (their
// per-request settings: sample_rows.h), and the comparison of CUDA outputs with the CPU oracle.
#ifndef DDS_TESTS_GPU_SAMPLE_PROBLEM_H_
#define DDS_TESTS_GPU_SAMPLE_PROBLEM_H_

#include <dds/dds.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "cpu/test_util.h"
#include "dtype.h"
#include "sample_rows.h"

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

// max_stash_width < 0: the config's default.
dds_sampler* make_sampler(int32_t backend, int32_t V, int32_t max_rows, int32_t max_requests,
                          int32_t max_stash_width = -1, uint32_t flags = 0) {
  dds_sampler_config c;
  REQUIRE(dds_sampler_config_init(&c, sizeof c) == DDS_OK);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = max_rows;
  c.max_requests = max_requests;
  if (max_stash_width >= 0) c.max_stash_width = max_stash_width;
  c.flags = flags;
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
  // The device array src back into dst (nothing for host arrays).
  template <class T>
  void get(std::vector<T>& dst, const T* src) {
    if (!device || src == nullptr || dst.empty()) return;
    REQUIRE(cudaMemcpy(dst.data(), src, dst.size() * sizeof(T), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
  }
};

// Outputs: poisoned buffers (tokens -7, floats NaN, probs all-ones bytes = NaN in every dtype).
struct OutBufs {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, conf, margin, entropy;
  std::vector<uint8_t> probs;
};

// graph: the call captured into a CUDA graph on a stream of its own, then the graph launched
// once (device arrays only).
Results run(dds_sampler* s, const Problem& pb, bool device, cudaStream_t stream = nullptr,
            bool graph = false) {
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
  dds_status st;
  if (graph) {
    cudaStream_t gs;
    REQUIRE(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking) == cudaSuccess);
    {
      const CapturedGraph graph(
          gs, [&] { st = dds_sample(s, &a, gs); }, cudaStreamCaptureModeThreadLocal);
      INFO(dds_last_error());
      REQUIRE(st == DDS_OK);
      graph.launch();
      REQUIRE(cudaStreamSynchronize(gs) == cudaSuccess);
    }
    cudaStreamDestroy(gs);
  } else {
    st = dds_sample(s, &a, stream);
  }
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
    const sample_rows::Settings q = sample_rows::mixed(r % 13, pb.offs[r], n, pb.unrows, rng);
    sample_rows::push(pb, q);
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

// Rows of a batch whose GPU outputs may part from the CPU backend's in compare (near-ties that
// the two backends' float sums resolve differently): 0.1%, and one more from 257 rows.
inline int allowed_rows(int32_t rows) { return rows / 1000 + (rows >= 257 ? 1 : 0); }

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
    const sample_rows::Settings q = sample_rows::filter(r % 18, r, V);
    sample_rows::push(pb, q);
    pb.seeds.push_back(rng());
    pb.steps.push_back((uint32_t)(rng() % 100));
    pb.pos.push_back((int32_t)(rng() % 100000));
    for (int32_t t = 0; t < V; ++t) {
      float v = sample_rows::filter_logit(q.kind, q.sigma * nd(rng), t, V, rng);
      if (q.kind != 3 && ud(rng) < 0.01f) v = -kInf;
      put_value(pb.logits, dtype, (size_t)r * V + t, v);
      put_value(pb.uncond, dtype, (size_t)r * V + t, 2.f * nd(rng));
    }
  }
  return pb;
}

}  // namespace

#endif  // DDS_TESTS_GPU_SAMPLE_PROBLEM_H_
