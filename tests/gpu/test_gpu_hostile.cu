// Hostile device-resident values on the CUDA backend (issue #26 §1, docs/sampling.md §1): the
// issue's row_offsets (tests/hostile_cases.h) for dds_sample (plain, filtered, guided; V = 37,
// 3001, 32000; f32 and bf16), dds_stash_logprobs and dds_reveal, and the draft counts -3, 99, 2^30
// of dds_verify_drafts: every output and every status word equal, bit for bit, to the CPU
// backend's on the same inputs, the status bits equal to the hand-written expectation, and debug
// mode returning DDS_ERR_INVALID_VALUE. Meant to run under compute-sanitizer memcheck as well.
#include "gpu_main.h"

#include <dds/dds.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hostile_cases.h"

using namespace hostile;

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
    if (n) DDS_CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
    return h;
  }
};

dds_sampler* make(int backend, int V, uint32_t flags = 0) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = 256;
  c.max_requests = 16;
  c.max_stash_width = 8;
  c.flags = flags;
  dds_sampler* s = nullptr;
  REQUIRE(dds_create(&c, &s) == DDS_OK);
  return s;
}

// Host arrays of one call, pointed at host memory (CPU) or copied to the device (CUDA).
template <typename T>
const T* on(int backend, const std::vector<T>& h, std::vector<std::unique_ptr<Dev<T>>>* keep) {
  if (backend == DDS_BACKEND_CPU) return h.data();
  keep->emplace_back(new Dev<T>(h));
  return keep->back()->p;
}

uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

// CPU and CUDA statistics agree within the contract's tolerance (docs/sampling.md: 1e-5 relative,
// 1e-6 absolute; infinities and NaNs exactly), not bit for bit: the backends sum in other orders.
bool near(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
      if (!(std::isnan(x) && std::isnan(y)) && x != y) return false;
      continue;
    }
    if (std::fabs((double)x - (double)y) > 1e-5 * std::fabs((double)y) + 1e-6) return false;
  }
  return true;
}

struct SampleOut {
  std::vector<int32_t> tokens, argmax, status;
  std::vector<float> logprobs, confidence, margin, entropy;
  bool operator==(const SampleOut& o) const {
    auto eqf = [](const std::vector<float>& a, const std::vector<float>& b) { return near(a, b); };
    return tokens == o.tokens && argmax == o.argmax && status == o.status &&
           eqf(logprobs, o.logprobs) && eqf(confidence, o.confidence) && eqf(margin, o.margin) &&
           eqf(entropy, o.entropy);
  }
};

// mode: 0 plain, 1 top-k / top-p, 2 guided (uncond rows mirror the logits rows).
SampleOut run_sample(int backend, const OffsetsCase& c, int V, int dtype, int mode) {
  const int32_t n = kRows;
  std::mt19937 rng(2603 + V + mode);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> lf((size_t)n * V), uf((size_t)n * V);
  for (float& x : lf) x = nd(rng);
  for (float& x : uf) x = nd(rng);
  for (int t = 0; t < V; ++t) lf[(size_t)40 * V + t] = -INFINITY;
  std::vector<uint16_t> lb(lf.size()), ub(uf.size());
  for (size_t q = 0; q < lf.size(); ++q) {
    lb[q] = to_bf16(lf[q]);
    ub[q] = to_bf16(uf[q]);
  }
  const std::vector<int32_t> offs(c.offs, c.offs + kReqs + 1), ks = {5, 3, 0, 7};
  const std::vector<float> T = {1.f, 0.7f, 1.3f, 0.9f}, ps = {1.f, 0.9f, 0.8f, 1.f};
  const std::vector<uint64_t> seeds = {11, 22, 33, 44};
  std::vector<std::unique_ptr<Dev<int32_t>>> ki;
  std::vector<std::unique_ptr<Dev<float>>> kf;
  std::vector<std::unique_ptr<Dev<uint16_t>>> kh;
  std::vector<std::unique_ptr<Dev<uint64_t>>> ku;
  dds_sampler* s = make(backend, V);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = n;
  a.num_requests = kReqs;
  a.row_offsets = on(backend, offs, &ki);
  a.dtype = dtype;
  a.logits = dtype == DDS_DTYPE_F32 ? (const void*)on(backend, lf, &kf) : (const void*)on(backend, lb, &kh);
  a.temperatures = on(backend, T, &kf);
  a.seeds = on(backend, seeds, &ku);
  a.step = 9;
  if (mode == 1) {
    a.top_ks = on(backend, ks, &ki);
    a.top_ps = on(backend, ps, &kf);
  }
  if (mode == 2) {
    a.uncond_logits =
        dtype == DDS_DTYPE_F32 ? (const void*)on(backend, uf, &kf) : (const void*)on(backend, ub, &kh);
    a.uncond_num_rows = n;
    a.guidance_scale = 1.5f;
  }
  SampleOut o;
  o.tokens.assign(n, -7);
  o.argmax.assign(n, -7);
  o.status.assign(kReqs, -7);
  o.logprobs.assign(n, 12345.f);
  o.confidence = o.margin = o.entropy = o.logprobs;
  int32_t *tok = const_cast<int32_t*>(on(backend, o.tokens, &ki)),
          *am = const_cast<int32_t*>(on(backend, o.argmax, &ki)),
          *st = const_cast<int32_t*>(on(backend, o.status, &ki));
  float *lp = const_cast<float*>(on(backend, o.logprobs, &kf)),
        *cf = const_cast<float*>(on(backend, o.confidence, &kf)),
        *mg = const_cast<float*>(on(backend, o.margin, &kf)),
        *en = const_cast<float*>(on(backend, o.entropy, &kf));
  a.tokens = tok;
  a.argmax = am;
  a.request_status = st;
  a.logprobs = lp;
  a.confidence = cf;
  a.margin = mg;
  a.entropy = en;
  const dds_status rc = dds_sample(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(rc == DDS_OK);
  if (backend == DDS_BACKEND_CUDA) {
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    auto back = [](void* dst, const void* src, size_t bytes) {
      DDS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    };
    back(o.tokens.data(), tok, n * 4);
    back(o.argmax.data(), am, n * 4);
    back(o.status.data(), st, kReqs * 4);
    back(o.logprobs.data(), lp, n * 4);
    back(o.confidence.data(), cf, n * 4);
    back(o.margin.data(), mg, n * 4);
    back(o.entropy.data(), en, n * 4);
  }
  dds_destroy(s);
  return o;
}

}  // namespace

TEST_CASE("hostile row_offsets: dds_sample on CUDA equals the CPU, bits as the rule says") {
  int32_t nc;
  const OffsetsCase* cs = cases(&nc);
  for (int32_t k = 0; k < nc; ++k)
    for (int V : {37, 3001, 32000})
      for (int dtype : {DDS_DTYPE_F32, DDS_DTYPE_BF16})
        for (int mode = 0; mode < 3; ++mode) {
          CAPTURE(cs[k].name);
          CAPTURE(V);
          CAPTURE(dtype);
          CAPTURE(mode);
          const SampleOut cpu = run_sample(DDS_BACKEND_CPU, cs[k], V, dtype, mode);
          const SampleOut gpu = run_sample(DDS_BACKEND_CUDA, cs[k], V, dtype, mode);
          CHECK(cpu == gpu);
          for (int r = 0; r < kReqs; ++r) {
            CHECK((gpu.status[r] & DDS_REQ_BAD_ROW_OFFSETS) == cs[k].flagged[r]);
            CHECK(((gpu.status[r] & DDS_REQ_EMPTY_ROW) != 0) == (segment_of(cs[k], 40).request == r));
          }
        }
}

TEST_CASE("hostile row_offsets: dds_stash_logprobs and dds_reveal on CUDA equal the CPU") {
  constexpr int V = 3001, kTop = 3, E = kTop + 1;
  std::mt19937 rng(2604);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> lg((size_t)kRows * V), scores(kRows);
  for (float& x : lg) x = nd(rng);
  for (int i = 0; i < kRows; ++i) scores[i] = (float)((i * 37) % kRows) / kRows;
  const std::vector<float> T = {1.f, 0.7f, 1.3f, 0.9f};
  int32_t nc;
  const OffsetsCase* cs = cases(&nc);
  for (int32_t k = 0; k < nc; ++k) {
    CAPTURE(cs[k].name);
    const std::vector<int32_t> offs(cs[k].offs, cs[k].offs + kReqs + 1);
    std::vector<int32_t> ids[2], ranks[2], st[2], rst[2], nrev[2];
    std::vector<float> lps[2];
    std::vector<uint8_t> rev[2];
    for (int b = 0; b < 2; ++b) {
      const int backend = b == 0 ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA;
      std::vector<std::unique_ptr<Dev<int32_t>>> ki;
      std::vector<std::unique_ptr<Dev<float>>> kf;
      std::vector<std::unique_ptr<Dev<uint8_t>>> k8;
      dds_sampler* s = make(backend, V);
      ids[b].assign((size_t)kReqs * kRows * E, -7);
      ranks[b] = ids[b];
      lps[b].assign(ids[b].size(), 12345.f);
      st[b].assign(kReqs, -7);
      dds_stash_args a;
      dds_stash_args_init(&a, sizeof a);
      a.num_rows = kRows;
      a.num_requests = kReqs;
      a.row_offsets = on(backend, offs, &ki);
      a.logits = on(backend, lg, &kf);
      a.temperatures = on(backend, T, &kf);
      a.num_top = kTop;
      a.num_slots = kReqs;
      a.rows_per_slot = kRows;
      int32_t* d_ids = const_cast<int32_t*>(on(backend, ids[b], &ki));
      int32_t* d_ranks = const_cast<int32_t*>(on(backend, ranks[b], &ki));
      int32_t* d_st = const_cast<int32_t*>(on(backend, st[b], &ki));
      float* d_lps = const_cast<float*>(on(backend, lps[b], &kf));
      a.out_token_ids = d_ids;
      a.out_ranks = d_ranks;
      a.out_logprobs = d_lps;
      a.request_status = d_st;
      REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
      rev[b].assign(kRows, 0xee);
      nrev[b].assign(kReqs, -7);
      rst[b].assign(kReqs, -7);
      dds_reveal_args r;
      dds_reveal_args_init(&r, sizeof r);
      r.num_rows = kRows;
      r.num_requests = kReqs;
      r.row_offsets = a.row_offsets;
      r.scores = on(backend, scores, &kf);
      r.count = 2;
      uint8_t* d_rev = const_cast<uint8_t*>(on(backend, rev[b], &k8));
      int32_t* d_nrev = const_cast<int32_t*>(on(backend, nrev[b], &ki));
      int32_t* d_rst = const_cast<int32_t*>(on(backend, rst[b], &ki));
      r.reveal = d_rev;
      r.num_revealed = d_nrev;
      r.request_status = d_rst;
      REQUIRE(dds_reveal(s, &r, nullptr) == DDS_OK);
      if (backend == DDS_BACKEND_CUDA) {
        DDS_CUDA_CHECK(cudaDeviceSynchronize());
        cudaMemcpy(ids[b].data(), d_ids, ids[b].size() * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(ranks[b].data(), d_ranks, ranks[b].size() * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(lps[b].data(), d_lps, lps[b].size() * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(st[b].data(), d_st, kReqs * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(rev[b].data(), d_rev, kRows, cudaMemcpyDeviceToHost);
        cudaMemcpy(nrev[b].data(), d_nrev, kReqs * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(rst[b].data(), d_rst, kReqs * 4, cudaMemcpyDeviceToHost);
      }
      dds_destroy(s);
    }
    CHECK(ids[0] == ids[1]);
    CHECK(ranks[0] == ranks[1]);
    CHECK(near(lps[0], lps[1]));
    CHECK(st[0] == st[1]);
    CHECK(rev[0] == rev[1]);
    CHECK(nrev[0] == nrev[1]);
    CHECK(rst[0] == rst[1]);
    for (int r = 0; r < kReqs; ++r) {
      CHECK(st[1][r] == cs[k].flagged[r]);
      CHECK(rst[1][r] == cs[k].flagged[r]);
    }
  }
}

TEST_CASE("hostile draft counts: dds_verify_drafts on CUDA equals the CPU, DDS_REQ_BAD_DRAFT_COUNT") {
  constexpr int V = 3001, R = kVerifyReqs, n = kDrafts;
  std::mt19937 rng(2605);
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<float> tl((size_t)R * (n + 1) * V), dl((size_t)R * n * V);
  for (float& x : tl) x = nd(rng);
  for (float& x : dl) x = nd(rng);
  std::vector<int32_t> drafts((size_t)R * n);
  for (size_t q = 0; q < drafts.size(); ++q) {
    const float* row = dl.data() + q * V;
    drafts[q] = (int32_t)(std::max_element(row, row + V) - row);
  }
  const std::vector<int32_t> counts(kDraftCounts, kDraftCounts + R);
  std::vector<int32_t> acc[2], toks[2], st[2];
  std::vector<float> lps[2];
  for (int b = 0; b < 2; ++b) {
    const int backend = b == 0 ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA;
    std::vector<std::unique_ptr<Dev<int32_t>>> ki;
    std::vector<std::unique_ptr<Dev<float>>> kf;
    dds_sampler* s = make(backend, V);
    acc[b].assign(R, -7);
    toks[b].assign((size_t)R * (n + 1), -7);
    st[b].assign(R, -7);
    lps[b].assign(toks[b].size(), 12345.f);
    dds_verify_args a;
    dds_verify_args_init(&a, sizeof a);
    a.num_requests = R;
    a.num_drafts = n;
    a.draft_counts = on(backend, counts, &ki);
    a.draft_tokens = on(backend, drafts, &ki);
    a.draft_logits = on(backend, dl, &kf);
    a.target_logits = on(backend, tl, &kf);
    a.seed = 7;
    int32_t* d_acc = const_cast<int32_t*>(on(backend, acc[b], &ki));
    int32_t* d_toks = const_cast<int32_t*>(on(backend, toks[b], &ki));
    int32_t* d_st = const_cast<int32_t*>(on(backend, st[b], &ki));
    float* d_lps = const_cast<float*>(on(backend, lps[b], &kf));
    a.accepted_counts = d_acc;
    a.out_tokens = d_toks;
    a.out_logprobs = d_lps;
    a.request_status = d_st;
    const dds_status rc = dds_verify_drafts(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(rc == DDS_OK);
    if (backend == DDS_BACKEND_CUDA) {
      DDS_CUDA_CHECK(cudaDeviceSynchronize());
      cudaMemcpy(acc[b].data(), d_acc, R * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(toks[b].data(), d_toks, toks[b].size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(st[b].data(), d_st, R * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(lps[b].data(), d_lps, lps[b].size() * 4, cudaMemcpyDeviceToHost);
    }
    dds_destroy(s);
  }
  CHECK(acc[0] == acc[1]);
  CHECK(toks[0] == toks[1]);
  CHECK(near(lps[0], lps[1]));
  CHECK(st[0] == st[1]);
  for (int r = 0; r < R; ++r) {
    CHECK((st[1][r] & DDS_REQ_BAD_DRAFT_COUNT) ==
          (kDraftCounts[r] == kDraftCountsUsed[r] ? 0 : DDS_REQ_BAD_DRAFT_COUNT));
    CHECK(acc[1][r] <= kDraftCountsUsed[r]);
  }
}

TEST_CASE("debug checks on CUDA: hostile row_offsets and draft counts are DDS_ERR_INVALID_VALUE") {
  constexpr int V = 37;
  dds_sampler* s = make(DDS_BACKEND_CUDA, V, DDS_FLAG_DEBUG_CHECKS);
  std::vector<float> lg((size_t)kRows * V, 0.f);
  Dev<float> d_lg(lg);
  Dev<int32_t> d_tok(std::vector<int32_t>(kRows, 0));
  int32_t nc;
  const OffsetsCase* cs = cases(&nc);
  for (int32_t k = 0; k < nc; ++k) {
    CAPTURE(cs[k].name);
    Dev<int32_t> d_offs(std::vector<int32_t>(cs[k].offs, cs[k].offs + kReqs + 1));
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = kRows;
    a.num_requests = kReqs;
    a.row_offsets = d_offs.p;
    a.logits = d_lg.p;
    a.tokens = d_tok.p;
    CHECK(dds_sample(s, &a, nullptr) == DDS_ERR_INVALID_VALUE);
    CHECK(std::string(dds_last_error()).find("row_offsets") != std::string::npos);
  }
  dds_destroy(s);
}

TEST_CASE("hostile token ids, num_token_ids, reveal parameters: CUDA bits and outputs equal the CPU") {
  constexpr int V = 37, R = 4, rows = 8, kTop = 3, E = kTop + 1, n = 4;
  std::mt19937 rng(2607);
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<float> lg((size_t)rows * V), tl((size_t)R * (n + 1) * V), dl((size_t)R * n * V), scores(rows);
  for (float& x : lg) x = nd(rng);
  for (float& x : tl) x = nd(rng);
  for (float& x : dl) x = nd(rng);
  for (int i = 0; i < rows; ++i) scores[i] = 0.1f * (float)i;
  const std::vector<int32_t> offs = {0, 2, 4, 6, 8}, ids = {1, 2, 3, 4, -5, 6, 7, 8, 9, 10, 11, 12},
                             nids = {-1, 2, 9, 3}, committed = {0, 1, 2, V, 4, 5, 6, -1},
                             nvalid = {2, 2, 2, 1}, counts = {2, 2, 4, 0};
  std::vector<int32_t> drafts((size_t)R * n, 3);
  drafts[0] = -1;
  drafts[(size_t)1 * n + 3] = V;
  const std::vector<float> thr = {NAN, 0.5f, 0.5f, 0.5f}, fac = {1.f, -0.5f, 1.f, 1.f},
                           pt = {0.f, 0.f, INFINITY, -1.f};
  const std::vector<int32_t> policies = {1, 2, 0, 0};
  std::vector<int32_t> out[2], st[2], vacc[2], vtok[2], vst[2], rst[2];
  std::vector<uint8_t> rev[2];
  for (int b = 0; b < 2; ++b) {
    const int backend = b == 0 ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA;
    std::vector<std::unique_ptr<Dev<int32_t>>> ki;
    std::vector<std::unique_ptr<Dev<float>>> kf;
    std::vector<std::unique_ptr<Dev<uint8_t>>> k8;
    dds_sampler* s = make(backend, V);
    out[b].assign((size_t)R * 2 * E, -7);
    st[b].assign(R, -7);
    dds_stash_args a;
    dds_stash_args_init(&a, sizeof a);
    a.num_rows = rows;
    a.num_requests = R;
    a.row_offsets = on(backend, offs, &ki);
    a.logits = on(backend, lg, &kf);
    a.token_ids = on(backend, ids, &ki);
    a.num_token_ids = on(backend, nids, &ki);
    a.committed_tokens = on(backend, committed, &ki);
    a.num_valid = on(backend, nvalid, &ki);
    a.num_top = kTop;
    a.num_slots = R;
    a.rows_per_slot = 2;
    int32_t* d_out = const_cast<int32_t*>(on(backend, out[b], &ki));
    int32_t* d_st = const_cast<int32_t*>(on(backend, st[b], &ki));
    a.out_token_ids = d_out;
    a.request_status = d_st;
    REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
    vacc[b].assign(R, -7);
    vtok[b].assign((size_t)R * (n + 1), -7);
    vst[b].assign(R, -7);
    dds_verify_args v;
    dds_verify_args_init(&v, sizeof v);
    v.num_requests = R;
    v.num_drafts = n;
    v.draft_counts = on(backend, counts, &ki);
    v.draft_tokens = on(backend, drafts, &ki);
    v.draft_logits = on(backend, dl, &kf);
    v.target_logits = on(backend, tl, &kf);
    int32_t* d_vacc = const_cast<int32_t*>(on(backend, vacc[b], &ki));
    int32_t* d_vtok = const_cast<int32_t*>(on(backend, vtok[b], &ki));
    int32_t* d_vst = const_cast<int32_t*>(on(backend, vst[b], &ki));
    v.accepted_counts = d_vacc;
    v.out_tokens = d_vtok;
    v.request_status = d_vst;
    REQUIRE(dds_verify_drafts(s, &v, nullptr) == DDS_OK);
    rev[b].assign(rows, 0xee);
    rst[b].assign(R, -7);
    dds_reveal_args r;
    dds_reveal_args_init(&r, sizeof r);
    r.num_rows = rows;
    r.num_requests = R;
    r.row_offsets = a.row_offsets;
    r.scores = on(backend, scores, &kf);
    r.policies = on(backend, policies, &ki);
    r.thresholds = on(backend, thr, &kf);
    r.factors = on(backend, fac, &kf);
    r.position_temperatures = on(backend, pt, &kf);
    uint8_t* d_rev = const_cast<uint8_t*>(on(backend, rev[b], &k8));
    int32_t* d_rst = const_cast<int32_t*>(on(backend, rst[b], &ki));
    r.reveal = d_rev;
    r.request_status = d_rst;
    REQUIRE(dds_reveal(s, &r, nullptr) == DDS_OK);
    if (backend == DDS_BACKEND_CUDA) {
      DDS_CUDA_CHECK(cudaDeviceSynchronize());
      cudaMemcpy(out[b].data(), d_out, out[b].size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(st[b].data(), d_st, R * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(vacc[b].data(), d_vacc, R * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(vtok[b].data(), d_vtok, vtok[b].size() * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(vst[b].data(), d_vst, R * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(rev[b].data(), d_rev, rows, cudaMemcpyDeviceToHost);
      cudaMemcpy(rst[b].data(), d_rst, R * 4, cudaMemcpyDeviceToHost);
    }
    dds_destroy(s);
  }
  CHECK(out[0] == out[1]);
  CHECK(st[0] == st[1]);
  CHECK(st[1] == std::vector<int32_t>{DDS_REQ_BAD_NUM_TOKEN_IDS, DDS_REQ_BAD_TOKEN_ID,
                                      DDS_REQ_BAD_NUM_TOKEN_IDS, 0});
  CHECK(vacc[0] == vacc[1]);
  CHECK(vtok[0] == vtok[1]);
  CHECK(vst[0] == vst[1]);
  CHECK(vst[1] == std::vector<int32_t>{DDS_REQ_BAD_TOKEN_ID, 0, 0, 0});
  CHECK(rev[0] == rev[1]);
  CHECK(rst[0] == rst[1]);
  CHECK(rst[1] == std::vector<int32_t>{DDS_REQ_BAD_REVEAL_PARAM, DDS_REQ_BAD_REVEAL_PARAM, 0,
                                       DDS_REQ_BAD_REVEAL_PARAM});
}
