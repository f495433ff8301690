// Host-emulated CUDA dds_verify_drafts (kernels/verify/verify.cuh) against the CPU backend; see run.sh.
#include <cuda_runtime.h>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include "verify/verify.cuh"
#include "reveal/reveal.cuh"
#include <dds/dds.h>
#include <cstdio>
#include <random>
#include <string>
#include "dtype.h"
using namespace dds;

static dds_sampler* mk(int V) {
  dds_sampler_config c; dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU; c.vocab_size = V; c.max_rows = 1 << 15; c.max_requests = 1024;
  dds_sampler* s; if (dds_create(&c, &s) != DDS_OK) { printf("create failed\n"); exit(1); }
  return s;
}

// mask: allowed-token masks (0 none, 1 dense: columns allowed with probability 0.7, 2 sparse:
// 0.05), request r % 5 == 2 with an all-zero mask, one spare word of stride; the drafts then take
// the best allowed column of the draft row (or a random column).
static int verify_case(std::mt19937& rng, int V, int R, int n, int kind, int mask = 0) {
  std::normal_distribution<float> N(0.f, 1.f);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  const int64_t mstride = (V + 31) / 32 + 1;
  std::vector<int32_t> masks((size_t)R * mstride, -1);
  if (mask) {
    for (auto& w : masks) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b) if (U(rng) < (mask == 1 ? 0.7f : 0.05f)) bits |= 1u << b;
      w = (int32_t)bits;
    }
    for (int r = 2; r < R; r += 5) for (int64_t w = 0; w < mstride; ++w) masks[(size_t)r * mstride + w] = 0;
  }
  auto allowed_col = [&](int r, int t) { return (((uint32_t)masks[(size_t)r * mstride + (t >> 5)]) >> (t & 31)) & 1u; };
  std::vector<float> T((size_t)R * (n + 1) * V), D((size_t)R * n * V);
  for (auto& x : T) x = 3.f * N(rng);
  for (int r = 0; r < R; ++r) for (int i = 0; i < n; ++i) for (int t = 0; t < V; ++t)
    D[((size_t)r * n + i) * V + t] = kind == 1 ? T[((size_t)r * (n + 1) + i) * V + t] : T[((size_t)r * (n + 1) + i) * V + t] + 1.5f * N(rng);
  for (int r = 0; r < R; ++r) { T[((size_t)r * (n + 1)) * V + (V > 1)] = -INFINITY; if (V > 5) T[((size_t)r*(n+1))*V + 5] = NAN; }
  std::vector<int32_t> counts, drafts, ks; std::vector<float> temps, ps, mps; std::vector<uint64_t> seeds; std::vector<uint32_t> steps;
  for (int r = 0; r < R; ++r) {
    counts.push_back(kind == 0 ? (int)(rng() % (n + 2)) - (r % 7 == 3) : n);
    if (kind == 0 && r % 5 == 2) counts.back() = r % 2 ? (1 << 30) : INT32_MIN + r;  // hostile: clamped, flagged
    int mode = r % 7;
    temps.push_back(mode == 0 ? 0.f : mode == 2 ? 0.7f : mode == 6 ? NAN : 1.f);
    ks.push_back(mode == 3 ? std::max(1, V / 10) : mode == 5 ? 3 : 0);
    ps.push_back(mode == 4 ? 0.8f : mode == 5 ? 0.9f : mode == 1 ? 0.3f : 1.f);
    mps.push_back(mode == 2 ? 0.05f : 0.f);
    seeds.push_back(rng()); steps.push_back(rng() % 100);
    for (int i = 0; i < n; ++i) {
      const float* q = &D[((size_t)r * n + i) * V]; int best = 0;
      for (int t = 1; t < V; ++t) if (q[t] > q[best] && allowed_col(r, t)) best = t;
      float u = U(rng);
      drafts.push_back(u < 0.6f ? best : u < 0.97f ? (int)(rng() % V) : -3);
    }
  }
  dds_verify_args a; dds_verify_args_init(&a, sizeof a);
  a.num_requests = R; a.num_drafts = n; a.draft_counts = counts.data(); a.draft_tokens = n ? drafts.data() : nullptr;
  a.draft_logits = n ? D.data() : nullptr; a.target_logits = T.data(); a.temperatures = temps.data(); a.top_ks = ks.data();
  a.top_ps = ps.data(); a.min_ps = mps.data(); a.seeds = seeds.data(); a.steps = steps.data(); a.banned_token = V > 3 ? V - 2 : -1;
  a.draft_row_stride = V; a.target_row_stride = V;
  if (mask) { a.allowed_token_masks = masks.data(); a.allowed_mask_stride = mstride; }
  std::vector<int32_t> acc(R, -7), out((size_t)R * (n + 1), -7), st(R, -7); std::vector<float> lp((size_t)R * (n + 1), 5);
  a.accepted_counts = acc.data(); a.out_tokens = out.data(); a.out_logprobs = lp.data(); a.request_status = st.data();
  static dds_sampler* cpu = nullptr; static int cv = -1; if (cv != V) { cpu = mk(V); cv = V; }
  if (dds_verify_drafts(cpu, &a, nullptr) != DDS_OK) { printf("cpu failed %s\n", dds_last_error()); exit(1); }
  // emulated GPU
  std::vector<int32_t> acc2(R, -7), out2((size_t)R * (n + 1), -7), st2(R, -7); std::vector<float> lp2((size_t)R * (n + 1), 5);
  verify::Params p{};
  p.V = V; p.nblocks = (V + 1023) / 1024; p.num_requests = R; p.n = n; p.draft_counts = a.draft_counts; p.draft_tokens = a.draft_tokens;
  p.draft_logits = a.draft_logits; p.draft_stride = V; p.target_logits = a.target_logits; p.target_stride = V; p.dtype = 0;
  p.vals = rule::Values{nullptr, 0.f, a.temperatures, 1.f, a.top_ks, 0, a.top_ps, 1.f, a.min_ps, 0.f, a.seeds, 0, a.steps, 0};
  p.banned = a.banned_token; p.allowed = a.allowed_token_masks; p.allowed_stride = a.allowed_mask_stride;
  p.accepted = acc2.data(); p.out_tokens = out2.data(); p.out_logprobs = lp2.data(); p.request_status = st2.data();
  std::vector<verify::RowInfo> rows((size_t)R * (2 * n + 1)); std::vector<verify::BlockSums> blocks((size_t)R * p.nblocks);
  p.rows = rows.data(); p.blocks = blocks.data();
  verify::launch_verify(p, nullptr);
  int bad = 0;
  for (int r = 0; r < R; ++r) {
    bool same = acc[r] == acc2[r] && st[r] == st2[r];
    for (int e = 0; e <= n; ++e) { size_t k = (size_t)r * (n + 1) + e; same &= out[k] == out2[k];
      same &= (std::isinf(lp[k]) && lp[k] == lp2[k]) || std::fabs(lp[k] - lp2[k]) <= 1e-6f + 1e-6f * std::fabs(lp[k]); }
    if (!same) { ++bad; if (bad <= 3) printf("  V%d n%d kind%d r%d: acc %d/%d st %d/%d tok[acc] %d/%d lp %g/%g\n", V, n, kind, r, acc[r], acc2[r], st[r], st2[r],
        out[(size_t)r*(n+1)+std::max(0,acc[r])], out2[(size_t)r*(n+1)+std::max(0,acc2[r])], lp[(size_t)r*(n+1)], lp2[(size_t)r*(n+1)]); }
  }
  int tot = 0; for (int r = 0; r < R; ++r) tot += acc[r];
  int outside = 0;  // output tokens of masked requests outside their masks (must be none)
  for (int r = 0; mask && r < R; ++r)
    for (int e = 0; e <= std::max(0, acc[r]) && e <= n; ++e) {
      const int t = out[(size_t)r * (n + 1) + e];
      if (st[r] == 0 && t >= 0 && t < V && !allowed_col(r, t)) ++outside;
    }
  bad += outside;
  printf("verify V=%d n=%d kind=%d mask=%d: %d/%d requests differ (cpu accepted %d)%s\n", V, n, kind, mask,
         bad, R, tot, outside ? ", TOKENS OUTSIDE THE MASK" : "");
  return bad;
}


// The configuration of bench/peers/decode_bench.py (bench_verify): R requests, n drafts, f32,
// targets 2*N(0,1), draft logits = target + N(0,1), drafts sampled from softmax(draft), T = 1,
// no filters, scalar seed. Compares with the CPU backend and prints mean accepted counts and the
// exact expectation sum_k prod_{i<k} alpha_i (alpha_i = sum min(p_i, q_i)).
static int bench_case(int V, int R, int n, uint64_t seed, uint32_t gen_seed, bool per_request) {
  std::mt19937 rng(gen_seed);
  std::normal_distribution<float> N(0.f, 1.f);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  std::vector<float> T((size_t)R * (n + 1) * V), D((size_t)R * n * V);
  for (auto& x : T) x = 2.f * N(rng);
  std::vector<int32_t> drafts((size_t)R * n);
  double expect = 0;
  std::vector<double> p(V), q(V);
  for (int r = 0; r < R; ++r) {
    double prod = 1;
    for (int i = 0; i < n; ++i) {
      float* d = &D[((size_t)r * n + i) * V];
      const float* t = &T[((size_t)r * (n + 1) + i) * V];
      for (int k = 0; k < V; ++k) d[k] = t[k] + N(rng);
      auto soft = [&](const float* x, std::vector<double>& o) {
        double m = -INFINITY, z = 0;
        for (int k = 0; k < V; ++k) m = std::max(m, (double)x[k]);
        for (int k = 0; k < V; ++k) z += (o[k] = std::exp((double)x[k] - m));
        for (int k = 0; k < V; ++k) o[k] /= z;
      };
      soft(t, p);
      soft(d, q);
      double a = 0, c = 0, u = U(rng);
      int tok = V - 1;
      for (int k = 0; k < V; ++k) a += std::min(p[k], q[k]);
      for (int k = 0; k < V; ++k) if ((c += q[k]) > u) { tok = k; break; }
      drafts[(size_t)r * n + i] = tok;
      prod *= a;
      expect += prod;
    }
  }
  dds_verify_args a; dds_verify_args_init(&a, sizeof a);
  a.num_requests = R; a.num_drafts = n; a.draft_tokens = drafts.data(); a.draft_logits = D.data();
  a.target_logits = T.data(); a.temperature = 1.f; a.seed = seed;
  // A scalar seed gives every request the same uniforms u_i and Gumbel noise (the counter has
  // no request index), so the requests' accepted counts are strongly correlated; per-request
  // seeds make them independent.
  std::vector<uint64_t> seeds(R);
  for (int r = 0; r < R; ++r) seeds[r] = seed * (uint64_t)R + (uint64_t)r;
  if (per_request) a.seeds = seeds.data();
  std::vector<int32_t> acc(R, -7), out((size_t)R * (n + 1), -7);
  std::vector<float> lp((size_t)R * (n + 1), 5);
  a.accepted_counts = acc.data(); a.out_tokens = out.data(); a.out_logprobs = lp.data();
  dds_sampler_config c; dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU; c.vocab_size = V; c.max_rows = R * (n + 1); c.max_requests = R;
  dds_sampler* cpu; if (dds_create(&c, &cpu) != DDS_OK) { printf("create failed\n"); exit(1); }
  if (dds_verify_drafts(cpu, &a, nullptr) != DDS_OK) { printf("cpu failed %s\n", dds_last_error()); exit(1); }
  dds_destroy(cpu);
  std::vector<int32_t> acc2(R, -7), out2((size_t)R * (n + 1), -7);
  std::vector<float> lp2((size_t)R * (n + 1), 5);
  verify::Params P{};
  P.V = V; P.nblocks = (V + 1023) / 1024; P.num_requests = R; P.n = n; P.draft_tokens = drafts.data();
  P.draft_logits = D.data(); P.draft_stride = V; P.target_logits = T.data(); P.target_stride = V;
  P.dtype = 0; P.banned = -1;
  P.vals = rule::Values{nullptr, 0.f, nullptr, 1.f, nullptr, 0, nullptr, 1.f, nullptr, 0.f, a.seeds, seed, nullptr, 0};
  P.accepted = acc2.data(); P.out_tokens = out2.data(); P.out_logprobs = lp2.data();
  // Scratch laid out as src/cuda_verify.cu does, in a workspace of workspace_bytes(V, max_rows,
  // max_requests) with max_rows = R * (n + 1), max_requests = R.
  std::vector<uint64_t> ws((verify::workspace_bytes(V, R * (n + 1), R) + 7) / 8, 0x7ff4ull << 48);
  const size_t rows_bytes = (2 * (size_t)(R * (n + 1)) * sizeof(verify::RowInfo) + 255) & ~(size_t)255;
  P.rows = reinterpret_cast<verify::RowInfo*>(ws.data());
  P.blocks = reinterpret_cast<verify::BlockSums*>(reinterpret_cast<char*>(ws.data()) + rows_bytes);
  verify::launch_verify(P, nullptr);
  int bad = 0, tc = 0, tg = 0;
  for (int r = 0; r < R; ++r) {
    tc += acc[r]; tg += acc2[r];
    bool same = acc[r] == acc2[r];
    for (int e = 0; e <= n; ++e) {
      size_t k = (size_t)r * (n + 1) + e;
      same &= out[k] == out2[k];
      same &= (std::isinf(lp[k]) && lp[k] == lp2[k]) || std::fabs(lp[k] - lp2[k]) <= 1e-6f + 1e-6f * std::fabs(lp[k]);
    }
    if (!same && ++bad <= 5)
      printf("  r%d: acc cpu %d emu %d, tok[acc] %d/%d\n", r, acc[r], acc2[r],
             out[(size_t)r * (n + 1) + acc[r]], out2[(size_t)r * (n + 1) + std::max(0, acc2[r])]);
  }
  printf("bench V=%d R=%d n=%d seed=%llu%s: %d/%d requests differ; mean accepted cpu %.3f emu %.3f, "
         "expected %.3f\n", V, R, n, (unsigned long long)seed, per_request ? " (per request)" : "", bad, R, (double)tc / R, (double)tg / R,
         expect / R);
  return bad;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc >= 4) {  // emu_verify V R n [seed [per]]: the decode_bench configuration only; with
                    // "per", request r gets seed * R + r instead of the scalar seed
    const int V = atoi(argv[1]), R = atoi(argv[2]), n = atoi(argv[3]);
    const uint64_t seed = argc >= 5 ? strtoull(argv[4], nullptr, 10) : 1;
    return bench_case(V, R, n, seed, 7u, argc >= 6 && std::string(argv[5]) == "per") != 0;
  }
  std::mt19937 rng(1);
  int bad = 0;
  for (int V : {7, 1025, 2500}) for (int n : {0, 1, 3}) for (int kind : {0, 1}) bad += verify_case(rng, V, 14, n, kind);
  for (int mask : {1, 2}) for (int V : {7, 1025, 2500}) for (int n : {0, 1, 3}) bad += verify_case(rng, V, 14, n, mask - 1, mask);
  printf("TOTAL bad %d\n", bad);
  return bad != 0;
}
