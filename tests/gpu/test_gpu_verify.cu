// dds_verify_drafts on the CUDA backend: parity with the CPU oracle (tokens, accepted counts,
// statuses exactly; log-probs within 1e-6) over V in {7, 1025, 32000}, n in {1, 4, 8}, per-request
// mixes of temperature / top-k / top-p / min-p, ragged draft counts, drafts that are all accepted
// or all rejected, f32 and bf16, poisoned outputs; graph capture and replay with new seeds and
// steps; a chi-square test that the output is distributed as sequential sampling from the targets
// with acceptance rate sum min(p, q); the decode_bench inputs (64 requests, V = 32000, n = 4
// and 8) against the CPU and the exact mean accepted count; bad input.
#include "gpu_main.h"

#include <dds/dds.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "dtype.h"

namespace {

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    DDS_CUDA_CHECK(cudaMalloc(&p, sizeof(T) * (n ? n : 1)));
    if (n) DDS_CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    if (n) cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost);
    return h;
  }
  void put(const std::vector<T>& h) {
    cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice);
  }
};

dds_sampler* make(int backend, int V, int max_rows = 4096, int max_requests = 1024) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = max_rows;
  c.max_requests = max_requests;
  dds_sampler* s = nullptr;
  REQUIRE(dds_create(&c, &s) == DDS_OK);
  return s;
}

// Inputs of one call, host side. Logits are kept as f32; `bf16` stores them as bf16 (rounded).
struct Case {
  int V = 0, R = 0, n = 0;
  bool bf16 = false;
  int banned = -1;
  std::vector<float> target, draft;  // [R*(n+1), V], [R*n, V]
  std::vector<int32_t> counts, drafts, ks;
  std::vector<float> temps, ps, minps;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
  std::vector<int32_t> mask;  // allowed-token masks [R, mask_stride] (empty: none)
  int64_t mask_stride = 0;
};

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = dds::f32_to_bf16(v[i]);
  return o;
}

// kind: 0 mixed, 1 drafts equal to targets (all accepted where p > 0), 2 drafts the targets can
// not produce (all rejected).
Case make_case(std::mt19937& rng, int V, int R, int n, int kind, bool bf16) {
  Case c;
  c.V = V;
  c.R = R;
  c.n = n;
  c.bf16 = bf16;
  c.banned = V > 3 ? V - 2 : -1;
  std::normal_distribution<float> N(0.f, 1.f);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  c.target.resize((size_t)R * (n + 1) * V);
  c.draft.resize((size_t)R * n * V);
  for (auto& x : c.target) x = 3.f * N(rng);
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < n; ++i)
      for (int t = 0; t < V; ++t) {
        const float tv = c.target[((size_t)r * (n + 1) + i) * V + t];
        c.draft[((size_t)r * n + i) * V + t] = kind == 1 ? tv : tv + 1.5f * N(rng);
      }
  // A few special columns: -inf and NaN in targets.
  for (int r = 0; r < R; ++r) {
    c.target[((size_t)r * (n + 1)) * V + (V > 1 ? 1 : 0)] = -INFINITY;
    if (V > 5) c.target[((size_t)r * (n + 1)) * V + 5] = NAN;
  }
  for (int r = 0; r < R; ++r) {
    c.counts.push_back(kind == 0 ? (int)(rng() % (n + 2)) - (r % 7 == 3 ? 1 : 0) : n);
    const int mode = r % 6;
    c.temps.push_back(mode == 0 ? 0.f : mode == 1 ? 1.f : mode == 2 ? 0.7f : 1.f);
    c.ks.push_back(mode == 3 ? std::max(1, V / 10) : mode == 5 ? 3 : 0);
    c.ps.push_back(mode == 4 ? 0.8f : mode == 5 ? 0.9f : 1.f);
    c.minps.push_back(mode == 2 ? 0.05f : 0.f);
    c.seeds.push_back(((uint64_t)rng() << 32) | rng());
    c.steps.push_back(rng() % 1000);
    for (int i = 0; i < n; ++i) {
      int d;
      if (kind == 2) {
        d = V > 1 ? 1 : 0;  // -inf in target row 0; elsewhere random but with a wrong draft row
        if (i > 0) d = c.banned >= 0 ? c.banned : 0;
      } else {
        // The argmax of the draft row (accepted often) or a random token; sometimes out of range.
        const float* q = &c.draft[((size_t)r * n + i) * V];
        int best = 0;
        for (int t = 1; t < V; ++t)
          if (q[t] > q[best]) best = t;
        const float u = U(rng);
        d = u < 0.6f ? best : u < 0.97f ? (int)(rng() % V) : (u < 0.985f ? -3 : V + 4);
      }
      c.drafts.push_back(d);
    }
  }
  if (kind == 2) {
    // Targets: token 1 (drafts[0]) impossible, banned token impossible: every draft rejected.
    for (int r = 0; r < R; ++r) c.target[((size_t)r * (n + 1)) * V + (V > 1 ? 1 : 0)] = -INFINITY;
  }
  return c;
}

struct Out {
  std::vector<int32_t> acc, tokens, status;
  std::vector<float> lp;
};

void fill_args(dds_verify_args* a, const Case& c) {
  dds_verify_args_init(a, sizeof *a);
  a->num_requests = c.R;
  a->num_drafts = c.n;
  a->dtype = c.bf16 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32;
  a->banned_token = c.banned;
}

Out run_cpu(dds_sampler* s, const Case& c) {
  Out o;
  o.acc.assign(c.R, -7);
  o.tokens.assign((size_t)c.R * (c.n + 1), -7);
  o.status.assign(c.R, -7);
  o.lp.assign((size_t)c.R * (c.n + 1), 123.f);
  std::vector<uint16_t> tb, db;
  dds_verify_args a;
  fill_args(&a, c);
  if (c.bf16) {
    tb = to_bf16(c.target);
    db = to_bf16(c.draft);
    a.target_logits = tb.data();
    a.draft_logits = c.n ? db.data() : nullptr;
  } else {
    a.target_logits = c.target.data();
    a.draft_logits = c.n ? c.draft.data() : nullptr;
  }
  a.draft_counts = c.counts.data();
  a.draft_tokens = c.n ? c.drafts.data() : nullptr;
  a.temperatures = c.temps.data();
  a.top_ks = c.ks.data();
  a.top_ps = c.ps.data();
  a.min_ps = c.minps.data();
  a.seeds = c.seeds.data();
  a.steps = c.steps.data();
  a.accepted_counts = o.acc.data();
  a.out_tokens = o.tokens.data();
  a.out_logprobs = o.lp.data();
  a.request_status = o.status.data();
  if (!c.mask.empty()) {
    a.allowed_token_masks = c.mask.data();
    a.allowed_mask_stride = c.mask_stride;
  }
  REQUIRE(dds_verify_drafts(s, &a, nullptr) == DDS_OK);
  return o;
}

// Device copies of a case, and the GPU call.
struct DevCase {
  Dev<float> target, draft;
  Dev<uint16_t> target16, draft16;
  Dev<int32_t> counts, drafts, ks;
  Dev<float> temps, ps, minps;
  Dev<uint64_t> seeds;
  Dev<uint32_t> steps;
  Dev<int32_t> acc, tokens, status;
  Dev<float> lp;
  Dev<int32_t> mask;
  explicit DevCase(const Case& c)
      : target(c.bf16 ? std::vector<float>() : c.target),
        draft(c.bf16 ? std::vector<float>() : c.draft),
        target16(c.bf16 ? to_bf16(c.target) : std::vector<uint16_t>()),
        draft16(c.bf16 ? to_bf16(c.draft) : std::vector<uint16_t>()),
        counts(c.counts),
        drafts(c.drafts),
        ks(c.ks),
        temps(c.temps),
        ps(c.ps),
        minps(c.minps),
        seeds(c.seeds),
        steps(c.steps),
        acc(std::vector<int32_t>(c.R, -7)),
        tokens(std::vector<int32_t>((size_t)c.R * (c.n + 1), -7)),
        status(std::vector<int32_t>(c.R, -7)),
        lp(std::vector<float>((size_t)c.R * (c.n + 1), 123.f)),
        mask(c.mask) {}
  void args(dds_verify_args* a, const Case& c) {
    fill_args(a, c);
    a->target_logits = c.bf16 ? (const void*)target16.p : (const void*)target.p;
    a->draft_logits = c.n ? (c.bf16 ? (const void*)draft16.p : (const void*)draft.p) : nullptr;
    a->draft_counts = counts.p;
    a->draft_tokens = c.n ? drafts.p : nullptr;
    a->temperatures = temps.p;
    a->top_ks = ks.p;
    a->top_ps = ps.p;
    a->min_ps = minps.p;
    a->seeds = seeds.p;
    a->steps = steps.p;
    a->accepted_counts = acc.p;
    a->out_tokens = tokens.p;
    a->out_logprobs = lp.p;
    a->request_status = status.p;
    if (!c.mask.empty()) {
      a->allowed_token_masks = mask.p;
      a->allowed_mask_stride = c.mask_stride;
    }
  }
  Out get() const {
    Out o;
    o.acc = acc.get();
    o.tokens = tokens.get();
    o.status = status.get();
    o.lp = lp.get();
    return o;
  }
};

// Requests whose accepted count or tokens differ; log-probs of equal tokens within 1e-6.
int compare(const Case& c, const Out& want, const Out& got) {
  int bad = 0;
  for (int r = 0; r < c.R; ++r) {
    bool same = want.acc[r] == got.acc[r] && want.status[r] == got.status[r];
    for (int e = 0; e <= c.n; ++e) {
      const size_t k = (size_t)r * (c.n + 1) + e;
      if (want.tokens[k] != got.tokens[k]) {
        same = false;
        continue;
      }
      const float a = want.lp[k], b = got.lp[k];
      if (std::isinf(a) || std::isinf(b)) {
        if (a != b) same = false;
      } else if (!(std::fabs(a - b) <= 1e-6f + 1e-6f * std::fabs(a))) {
        same = false;
      }
    }
    if (!same) {
      ++bad;
      if (bad <= 3)
        MESSAGE("request " << r << ": cpu acc " << want.acc[r] << " gpu acc " << got.acc[r]
                           << ", cpu status " << want.status[r] << " gpu " << got.status[r]
                           << ", cpu token[acc] "
                           << want.tokens[(size_t)r * (c.n + 1) + std::max(0, want.acc[r])]
                           << " gpu " << got.tokens[(size_t)r * (c.n + 1) + std::max(0, got.acc[r])]);
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("CUDA dds_verify_drafts matches the CPU oracle") {
  std::mt19937 rng(909);
  for (int V : {7, 1025, 32000}) {
    dds_sampler* cpu = make(DDS_BACKEND_CPU, V);
    dds_sampler* gpu = make(DDS_BACKEND_CUDA, V);
    for (int n : {1, 4, 8}) {
      for (int kind : {0, 1, 2}) {
        for (bool bf16 : {false, true}) {
          if (bf16 && kind != 0) continue;
          const int R = V == 32000 ? 12 : 30;
          CAPTURE(V);
          CAPTURE(n);
          CAPTURE(kind);
          CAPTURE(bf16);
          Case c = make_case(rng, V, R, n, kind, bf16);
          const Out want = run_cpu(cpu, c);
          DevCase d(c);
          dds_verify_args a;
          d.args(&a, c);
          REQUIRE(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
          DDS_CUDA_CHECK(cudaDeviceSynchronize());
          const Out got = d.get();
          CHECK(compare(c, want, got) == 0);
          int acc_total = 0;
          for (int r = 0; r < R; ++r) acc_total += want.acc[r];
          if (kind == 2) CHECK(acc_total == 0);
          if (kind == 1) {
            // Equal rows: every in-range draft with p > 0 is accepted; the mix makes most so.
            CHECK(acc_total > 0);
          }
        }
      }
    }
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
}

TEST_CASE("CUDA dds_verify_drafts with allowed-token masks matches the CPU oracle") {
  std::mt19937 rng(919);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  for (int V : {7, 1025, 32000}) {
    dds_sampler* cpu = make(DDS_BACKEND_CPU, V);
    dds_sampler* gpu = make(DDS_BACKEND_CUDA, V);
    for (int n : {1, 4}) {
      for (int dense : {1, 0}) {
        for (bool bf16 : {false, true}) {
          const int R = V == 32000 ? 12 : 30;
          CAPTURE(V);
          CAPTURE(n);
          CAPTURE(dense);
          CAPTURE(bf16);
          Case c = make_case(rng, V, R, n, 1 - dense, bf16);
          // Each column allowed with probability 0.7 (dense) or 0.05; request 2 none (empty).
          c.mask_stride = (V + 31) / 32 + 2;
          c.mask.assign((size_t)R * c.mask_stride, 0);
          for (int r = 0; r < R; ++r)
            for (int64_t w = 0; w < c.mask_stride; ++w) {
              uint32_t bits = 0;
              for (int b = 0; b < 32; ++b)
                if (r != 2 && U(rng) < (dense ? 0.7f : 0.05f)) bits |= 1u << b;
              c.mask[(size_t)r * c.mask_stride + w] = (int32_t)bits;
            }
          const Out want = run_cpu(cpu, c);
          DevCase d(c);
          dds_verify_args a;
          d.args(&a, c);
          REQUIRE(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
          DDS_CUDA_CHECK(cudaDeviceSynchronize());
          const Out got = d.get();
          CHECK(compare(c, want, got) == 0);
          CHECK(want.status[2] != 0);  // the all-zero mask: an empty row
        }
      }
    }
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
}

TEST_CASE("CUDA dds_verify_drafts: no drafts, strided rows, bad device values flagged like the CPU") {
  std::mt19937 rng(77);
  const int V = 1025;
  dds_sampler* cpu = make(DDS_BACKEND_CPU, V);
  dds_sampler* gpu = make(DDS_BACKEND_CUDA, V);
  for (int n : {0, 3}) {
    CAPTURE(n);
    Case c = make_case(rng, V, 9, n, 0, false);
    c.temps[1] = NAN;
    c.temps[2] = -1.f;
    c.ks[3] = -4;
    c.ps[4] = NAN;
    c.minps[5] = -0.5f;
    c.minps[6] = 2.f;
    // One request whose target row 0 is entirely -inf (empty row).
    for (int t = 0; t < V; ++t) c.target[((size_t)7 * (n + 1)) * V + t] = -INFINITY;
    const Out want = run_cpu(cpu, c);
    DevCase d(c);
    dds_verify_args a;
    d.args(&a, c);
    REQUIRE(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(compare(c, want, d.get()) == 0);
    CHECK((want.status[7] & DDS_REQ_EMPTY_ROW) != 0);
  }
  // Strided rows (stride V + 3) on both backends.
  {
    Case c = make_case(rng, V, 5, 2, 0, false);
    const int S = V + 3;
    auto widen = [&](const std::vector<float>& v) {
      std::vector<float> w(v.size() / V * S, 42.f);
      for (size_t row = 0; row < v.size() / V; ++row)
        std::copy(v.begin() + row * V, v.begin() + (row + 1) * V, w.begin() + row * S);
      return w;
    };
    const Out want = run_cpu(cpu, c);
    Case cw = c;
    cw.target = widen(c.target);
    cw.draft = widen(c.draft);
    DevCase d(cw);
    dds_verify_args a;
    d.args(&a, cw);
    a.target_row_stride = S;
    a.draft_row_stride = S;
    REQUIRE(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(compare(c, want, d.get()) == 0);
  }
  dds_destroy(cpu);
  dds_destroy(gpu);
}

TEST_CASE("CUDA dds_verify_drafts under graph capture: replay with new seeds and steps") {
  std::mt19937 rng(5);
  const int V = 1025, n = 4;
  dds_sampler* cpu = make(DDS_BACKEND_CPU, V);
  dds_sampler* gpu = make(DDS_BACKEND_CUDA, V);
  Case c = make_case(rng, V, 16, n, 0, false);
  DevCase d(c);
  dds_verify_args a;
  d.args(&a, c);
  cudaStream_t st;
  DDS_CUDA_CHECK(cudaStreamCreate(&st));
  dds_status vs = DDS_OK;
  const CapturedGraph graph(st, [&] { vs = dds_verify_drafts(gpu, &a, (dds_stream)st); });
  REQUIRE(vs == DDS_OK);
  for (int rep = 0; rep < 3; ++rep) {
    CAPTURE(rep);
    for (auto& s : c.seeds) s = s * 6364136223846793005ull + 1442695040888963407ull;
    for (auto& s : c.steps) s += 11;
    d.seeds.put(c.seeds);
    d.steps.put(c.steps);
    d.tokens.put(std::vector<int32_t>((size_t)c.R * (n + 1), -7));
    d.acc.put(std::vector<int32_t>(c.R, -7));
    graph.launch();
    DDS_CUDA_CHECK(cudaStreamSynchronize(st));
    const Out want = run_cpu(cpu, c);
    CHECK(compare(c, want, d.get()) == 0);
  }
  cudaStreamDestroy(st);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

namespace {
std::vector<double> softmax(const std::vector<float>& l) {
  double m = -INFINITY;
  for (float x : l) m = std::max(m, (double)x);
  std::vector<double> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp((double)l[i] - m);
  for (double& x : p) x /= z;
  return p;
}
double chi2_crit(int dof) {  // Wilson-Hilferty, one-sided ~1e-6
  const double z = 4.753424308822899, h = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
}
}  // namespace

TEST_CASE("CUDA dds_verify_drafts: output ~ sequential target sampling; acceptance = sum min(p,q)") {
  const int V = 6, n = 2, R = 1000, calls = 100;  // 1e5 trials
  dds_sampler* gpu = make(DDS_BACKEND_CUDA, V, R * (n + 1), R);
  const std::vector<float> q0 = {2.0f, 0.5f, 0.1f, -1.f, 1.0f, 0.f};
  const std::vector<float> q1 = {0.f, 0.f, 1.5f, 1.5f, -2.f, 0.3f};
  const std::vector<float> p0 = {1.0f, 1.2f, -0.5f, 0.2f, 1.0f, -3.f};
  const std::vector<float> p1 = {0.3f, -1.f, 2.0f, 0.1f, 0.f, 0.7f};
  const std::vector<float> p2 = {-1.f, 0.f, 0.f, 1.f, 2.f, 0.5f};
  const auto Q0 = softmax(q0), Q1 = softmax(q1), P0 = softmax(p0), P1 = softmax(p1);
  std::vector<float> draft((size_t)R * n * V), target((size_t)R * (n + 1) * V);
  for (int r = 0; r < R; ++r) {
    std::copy(q0.begin(), q0.end(), draft.begin() + ((size_t)r * n + 0) * V);
    std::copy(q1.begin(), q1.end(), draft.begin() + ((size_t)r * n + 1) * V);
    std::copy(p0.begin(), p0.end(), target.begin() + ((size_t)r * (n + 1) + 0) * V);
    std::copy(p1.begin(), p1.end(), target.begin() + ((size_t)r * (n + 1) + 1) * V);
    std::copy(p2.begin(), p2.end(), target.begin() + ((size_t)r * (n + 1) + 2) * V);
  }
  std::mt19937_64 rng(12345);
  auto draw = [&](const std::vector<double>& p) {
    std::discrete_distribution<int> dd(p.begin(), p.end());
    return dd(rng);
  };
  std::vector<int32_t> drafts((size_t)R * n), acc(R), out((size_t)R * (n + 1));
  std::vector<float> outlp((size_t)R * (n + 1));
  std::vector<uint64_t> seeds(R);
  Dev<float> dd(draft), dt(target), dlp(outlp);
  Dev<int32_t> ddr(drafts), dacc(acc), dout(out);
  Dev<uint64_t> dseeds(seeds);
  dds_verify_args a;
  dds_verify_args_init(&a, sizeof a);
  a.num_requests = R;
  a.num_drafts = n;
  a.draft_tokens = ddr.p;
  a.draft_logits = dd.p;
  a.target_logits = dt.p;
  a.seeds = dseeds.p;
  a.accepted_counts = dacc.p;
  a.out_tokens = dout.p;
  a.out_logprobs = dlp.p;
  std::vector<double> h0(V, 0), h1(V, 0);
  double n1 = 0, accepted_first = 0;
  bool shape_ok = true, lp_ok = true;
  for (int c = 0; c < calls; ++c) {
    for (int r = 0; r < R; ++r) {
      seeds[r] = (uint64_t)c * R + r + 777;
      drafts[(size_t)r * n + 0] = draw(Q0);
      drafts[(size_t)r * n + 1] = draw(Q1);
    }
    dseeds.put(seeds);
    ddr.put(drafts);
    REQUIRE(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    acc = dacc.get();
    out = dout.get();
    outlp = dlp.get();
    for (int r = 0; r < R; ++r) {
      const int32_t* o = &out[(size_t)r * (n + 1)];
      if (acc[r] < 0 || acc[r] > n) {
        shape_ok = false;
        continue;
      }
      for (int e = 0; e <= n; ++e) shape_ok &= (e <= acc[r]) == (o[e] >= 0);
      for (int e = 0; e < acc[r]; ++e) shape_ok &= o[e] == drafts[(size_t)r * n + e];
      h0[o[0]] += 1;
      if (acc[r] >= 1) {
        accepted_first += 1;
        h1[o[1]] += 1;
        n1 += 1;
      }
      lp_ok &= std::fabs(outlp[(size_t)r * (n + 1)] - std::log(P0[o[0]])) < 1e-5;
    }
  }
  CHECK(shape_ok);
  CHECK(lp_ok);
  const double N = (double)R * calls;
  double chi0 = 0, chi1 = 0, overlap = 0;
  for (int t = 0; t < V; ++t) {
    chi0 += (h0[t] - N * P0[t]) * (h0[t] - N * P0[t]) / (N * P0[t]);
    chi1 += (h1[t] - n1 * P1[t]) * (h1[t] - n1 * P1[t]) / (n1 * P1[t]);
    overlap += std::min(P0[t], Q0[t]);
  }
  MESSAGE("chi2 first output " << chi0 << ", second " << chi1 << " (critical " << chi2_crit(V - 1)
                               << "); first acceptance " << accepted_first / N << " vs sum min(p,q) "
                               << overlap);
  CHECK(chi0 < chi2_crit(V - 1));
  CHECK(chi1 < chi2_crit(V - 1));
  const double sd = std::sqrt(N * overlap * (1 - overlap));
  CHECK(std::fabs(accepted_first - N * overlap) < 5 * sd);
  dds_destroy(gpu);
}

// The configuration of bench/peers/decode_bench.py (bench_verify), with the sampler's capacities
// as the bench creates it (max_rows = R * (n + 1), max_requests = R): 64 requests, V = 32000,
// n = 4 and 8, f32, targets 2 * N(0, 1), draft logits = target + N(0, 1), drafts sampled from
// softmax(draft), temperature 1, no filters. Every call is compared with the CPU backend
// (tokens, accepted counts, log-probs). With a scalar seed every request shares the uniforms u_i
// (the noise counter has no request index), so one call's mean accepted count is one draw of a
// strongly correlated quantity; with per-request seeds the counts are independent and their mean
// over the calls must match the exact expectation sum_k prod_{i<k} alpha_{r,i} (alpha = sum
// min(p, q)) within 5 standard deviations.
TEST_CASE("CUDA dds_verify_drafts on the decode_bench inputs (64 requests, V = 32000)") {
  const int V = 32000, R = 64, scalar_calls = 2, calls = 12;
  for (int n : {4, 8}) {
    CAPTURE(n);
    std::mt19937 rng(4242 + n);
    std::normal_distribution<float> N(0.f, 1.f);
    std::uniform_real_distribution<double> U(0.0, 1.0);
    std::vector<float> target((size_t)R * (n + 1) * V), draft((size_t)R * n * V);
    for (auto& x : target) x = 2.f * N(rng);
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < n; ++i)
        for (int t = 0; t < V; ++t)
          draft[((size_t)r * n + i) * V + t] = target[((size_t)r * (n + 1) + i) * V + t] + N(rng);
    // alpha_{r,i} = sum_t min(p, q); the exact mean and variance of each request's count.
    double mean = 0, var = 0, alpha_sum = 0;
    for (int r = 0; r < R; ++r) {
      double pk = 1, e = 0, e2 = 0;
      for (int i = 0; i < n; ++i) {
        const auto p = softmax(std::vector<float>(target.begin() + ((size_t)r * (n + 1) + i) * V,
                                                  target.begin() + ((size_t)r * (n + 1) + i + 1) * V));
        const auto q = softmax(std::vector<float>(draft.begin() + ((size_t)r * n + i) * V,
                                                  draft.begin() + ((size_t)r * n + i + 1) * V));
        double a = 0;
        for (int t = 0; t < V; ++t) a += std::min(p[t], q[t]);
        alpha_sum += a;
        pk *= a;  // P(acc >= i + 1)
        e += pk;
        e2 += (2.0 * (i + 1) - 1.0) * pk;
      }
      mean += e;
      var += e2 - e * e;
    }
    // Drafts d ~ q, drawn afresh for every call (inverse CDF in float64).
    std::vector<int32_t> drafts((size_t)R * n);
    auto draw_drafts = [&]() {
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < n; ++i) {
          const auto q = softmax(std::vector<float>(draft.begin() + ((size_t)r * n + i) * V,
                                                    draft.begin() + ((size_t)r * n + i + 1) * V));
          const double u = U(rng);
          double c = 0;
          int tok = V - 1;
          for (int t = 0; t < V; ++t)
            if ((c += q[t]) > u) {
              tok = t;
              break;
            }
          drafts[(size_t)r * n + i] = tok;
        }
    };
    dds_sampler* cpu = make(DDS_BACKEND_CPU, V, R * (n + 1), R);
    dds_sampler* gpu = make(DDS_BACKEND_CUDA, V, R * (n + 1), R);
    Dev<float> dt(target), dd(draft);
    Dev<int32_t> ddr(drafts), dacc(std::vector<int32_t>(R, -7));
    Dev<int32_t> dout(std::vector<int32_t>((size_t)R * (n + 1), -7));
    Dev<float> dlp(std::vector<float>((size_t)R * (n + 1), 123.f));
    std::vector<uint64_t> seeds(R);
    Dev<uint64_t> dseeds(seeds);
    Case shape;  // for compare(): R and n only
    shape.R = R;
    shape.n = n;
    int bad = 0;
    long long acc_total = 0;
    for (int call = 0; call < scalar_calls + calls; ++call) {
      const bool per_request = call >= scalar_calls;
      draw_drafts();
      for (int r = 0; r < R; ++r) seeds[r] = (uint64_t)call * R + r + 1;
      ddr.put(drafts);
      dseeds.put(seeds);
      dds_verify_args a;
      dds_verify_args_init(&a, sizeof a);
      a.num_requests = R;
      a.num_drafts = n;
      a.temperature = 1.f;
      a.seed = (uint64_t)call + 1;  // the bench's form: seed = call index
      Out want;
      want.acc.assign(R, -7);
      want.tokens.assign((size_t)R * (n + 1), -7);
      want.lp.assign((size_t)R * (n + 1), 123.f);
      want.status.assign(R, 0);
      a.target_logits = target.data();
      a.draft_logits = draft.data();
      a.draft_tokens = drafts.data();
      a.seeds = per_request ? seeds.data() : nullptr;
      a.accepted_counts = want.acc.data();
      a.out_tokens = want.tokens.data();
      a.out_logprobs = want.lp.data();
      REQUIRE(dds_verify_drafts(cpu, &a, nullptr) == DDS_OK);
      a.target_logits = dt.p;
      a.draft_logits = dd.p;
      a.draft_tokens = ddr.p;
      a.seeds = per_request ? dseeds.p : nullptr;
      a.accepted_counts = dacc.p;
      a.out_tokens = dout.p;
      a.out_logprobs = dlp.p;
      REQUIRE(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
      DDS_CUDA_CHECK(cudaDeviceSynchronize());
      Out got;
      got.acc = dacc.get();
      got.tokens = dout.get();
      got.lp = dlp.get();
      got.status.assign(R, 0);
      CAPTURE(call);
      bad += compare(shape, want, got);
      int cpu_sum = 0, gpu_sum = 0;
      for (int r = 0; r < R; ++r) {
        cpu_sum += want.acc[r];
        gpu_sum += got.acc[r];
      }
      if (per_request) acc_total += gpu_sum;
      if (!per_request)
        MESSAGE("n " << n << " scalar seed " << a.seed << " (shared uniforms): mean accepted CPU "
                     << (double)cpu_sum / R << ", GPU " << (double)gpu_sum / R);
    }
    CHECK(bad == 0);
    const double expect = mean * calls, sd = std::sqrt(var * calls);
    MESSAGE("n " << n << ": mean alpha " << alpha_sum / (R * n) << "; per-request seeds, mean accepted "
                 << (double)acc_total / ((double)R * calls) << " vs exact " << mean / R << " (sd of the mean "
                 << sd / ((double)R * calls) << ")");
    CHECK(std::fabs((double)acc_total - expect) < 5 * sd);
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
}

TEST_CASE("CUDA dds_verify_drafts: bad input returns error codes") {
  const int V = 8;
  dds_sampler* gpu = make(DDS_BACKEND_CUDA, V, 64, 8);
  float* d = nullptr;
  int32_t* t = nullptr;
  DDS_CUDA_CHECK(cudaMalloc(&d, 256 * sizeof(float)));
  DDS_CUDA_CHECK(cudaMalloc(&t, 64 * sizeof(int32_t)));
  DDS_CUDA_CHECK(cudaMemset(d, 0, 256 * sizeof(float)));
  DDS_CUDA_CHECK(cudaMemset(t, 0, 64 * sizeof(int32_t)));
  std::vector<float> host(256, 0.f);
  dds_verify_args a;
  dds_verify_args_init(&a, sizeof a);
  a.num_drafts = 2;
  a.target_logits = d;
  a.draft_logits = d + 64;
  a.draft_tokens = t;
  a.accepted_counts = t + 8;
  a.out_tokens = t + 16;
  CHECK(dds_verify_drafts(gpu, &a, nullptr) == DDS_OK);
  DDS_CUDA_CHECK(cudaDeviceSynchronize());
  dds_verify_args b = a;
  b.out_tokens = nullptr;
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_NULL_POINTER);
  b = a;
  b.draft_tokens = nullptr;
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_NULL_POINTER);
  b = a;
  b.target_logits = host.data();  // host memory on the CUDA backend
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  b = a;
  b.num_drafts = -1;
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  b = a;
  b.num_requests = 100;  // > max_requests
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_CAPACITY);
  b = a;
  b.num_requests = 8;
  b.num_drafts = 8;  // 8 * 9 rows > max_rows 64
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_CAPACITY);
  b = a;
  b.temperature = NAN;
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  b = a;
  b.target_row_stride = 3;  // < vocab
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  b = a;
  b.banned_token = V;
  CHECK(dds_verify_drafts(gpu, &b, nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  cudaFree(d);
  cudaFree(t);
  dds_destroy(gpu);
}
