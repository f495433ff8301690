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
#include <functional>
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

// The arrays of one call on one backend: in() places an input, out() an output (host memory on
// the CPU; on CUDA a device copy, which fetch() copies back into the host vector after the call).
struct Call {
  int backend;
  std::vector<std::shared_ptr<void>> keep;
  std::vector<std::function<void()>> backs;
  explicit Call(int b) : backend(b) {}
  template <typename T>
  const T* in(const std::vector<T>& h) {
    if (backend == DDS_BACKEND_CPU) return h.data();
    auto d = std::make_shared<Dev<T>>(h);
    keep.push_back(d);
    return d->p;
  }
  template <typename T>
  T* out(std::vector<T>& h) {
    if (backend == DDS_BACKEND_CPU) return h.data();
    auto d = std::make_shared<Dev<T>>(h);
    keep.push_back(d);
    backs.push_back([d, &h] { h = d->get(); });
    return d->p;
  }
  void fetch() {
    if (backend != DDS_BACKEND_CUDA) return;
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& b : backs) b();
  }
};

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
  const std::vector<int32_t> offs(c.offs, c.offs + kReqs + 1), ks(kTopKs, kTopKs + kReqs);
  const std::vector<float> T(kTemps, kTemps + kReqs), ps(kTopPs, kTopPs + kReqs);
  const std::vector<uint64_t> seeds(kSeeds, kSeeds + kReqs);
  Call k(backend);
  dds_sampler* s = make(backend, V);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = n;
  a.num_requests = kReqs;
  a.row_offsets = k.in(offs);
  a.dtype = dtype;
  a.logits = dtype == DDS_DTYPE_F32 ? (const void*)k.in(lf) : (const void*)k.in(lb);
  a.temperatures = k.in(T);
  a.seeds = k.in(seeds);
  a.step = 9;
  if (mode == 1) {
    a.top_ks = k.in(ks);
    a.top_ps = k.in(ps);
  }
  if (mode == 2) {
    a.uncond_logits = dtype == DDS_DTYPE_F32 ? (const void*)k.in(uf) : (const void*)k.in(ub);
    a.uncond_num_rows = n;
    a.guidance_scale = 1.5f;
  }
  SampleOut o;
  o.tokens.assign(n, -7);
  o.argmax.assign(n, -7);
  o.status.assign(kReqs, -7);
  o.logprobs.assign(n, 12345.f);
  o.confidence = o.margin = o.entropy = o.logprobs;
  a.tokens = k.out(o.tokens);
  a.argmax = k.out(o.argmax);
  a.request_status = k.out(o.status);
  a.logprobs = k.out(o.logprobs);
  a.confidence = k.out(o.confidence);
  a.margin = k.out(o.margin);
  a.entropy = k.out(o.entropy);
  const dds_status rc = dds_sample(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(rc == DDS_OK);
  k.fetch();
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
  constexpr int V = 3001, E = kStashTop + 1;
  std::mt19937 rng(2604);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> lg((size_t)kRows * V), scores(kRows);
  for (float& x : lg) x = nd(rng);
  for (int i = 0; i < kRows; ++i) scores[i] = reveal_score(i);
  const std::vector<float> T(kTemps, kTemps + kReqs);
  int32_t nc;
  const OffsetsCase* cs = cases(&nc);
  for (int32_t k = 0; k < nc; ++k) {
    CAPTURE(cs[k].name);
    const std::vector<int32_t> offs(cs[k].offs, cs[k].offs + kReqs + 1);
    std::vector<int32_t> ids[2], ranks[2], st[2], rst[2], nrev[2];
    std::vector<float> lps[2];
    std::vector<uint8_t> rev[2];
    for (int b = 0; b < 2; ++b) {
      Call k(b == 0 ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA);
      dds_sampler* s = make(k.backend, V);
      ids[b].assign((size_t)kReqs * kRows * E, -7);
      ranks[b] = ids[b];
      lps[b].assign(ids[b].size(), 12345.f);
      st[b].assign(kReqs, -7);
      dds_stash_args a;
      dds_stash_args_init(&a, sizeof a);
      set_offsets_stash(&a, k.in(offs), k.in(lg), k.in(T));
      a.out_token_ids = k.out(ids[b]);
      a.out_ranks = k.out(ranks[b]);
      a.out_logprobs = k.out(lps[b]);
      a.request_status = k.out(st[b]);
      REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
      rev[b].assign(kRows, 0xee);
      nrev[b].assign(kReqs, -7);
      rst[b].assign(kReqs, -7);
      dds_reveal_args r;
      dds_reveal_args_init(&r, sizeof r);
      set_offsets_reveal(&r, a.row_offsets, k.in(scores));
      r.reveal = k.out(rev[b]);
      r.num_revealed = k.out(nrev[b]);
      r.request_status = k.out(rst[b]);
      REQUIRE(dds_reveal(s, &r, nullptr) == DDS_OK);
      k.fetch();
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
  const std::vector<int32_t> drafts = argmax_drafts(dl, V);
  const std::vector<int32_t> counts(kDraftCounts, kDraftCounts + R);
  std::vector<int32_t> acc[2], toks[2], st[2];
  std::vector<float> lps[2];
  for (int b = 0; b < 2; ++b) {
    Call k(b == 0 ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA);
    dds_sampler* s = make(k.backend, V);
    acc[b].assign(R, -7);
    toks[b].assign((size_t)R * (n + 1), -7);
    st[b].assign(R, -7);
    lps[b].assign(toks[b].size(), 12345.f);
    dds_verify_args a;
    dds_verify_args_init(&a, sizeof a);
    set_verify(&a, R, n, k.in(counts), k.in(drafts), k.in(dl), k.in(tl), k.out(acc[b]),
               k.out(toks[b]));
    a.seed = 7;
    a.out_logprobs = k.out(lps[b]);
    a.request_status = k.out(st[b]);
    const dds_status rc = dds_verify_drafts(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(rc == DDS_OK);
    k.fetch();
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
  using namespace bad_ids;
  constexpr int V = 37, R = kReqs, rows = kNumRows, E = kTop + 1, n = kNumDrafts;
  std::mt19937 rng(2607);
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<float> lg((size_t)rows * V), tl((size_t)R * (n + 1) * V), dl((size_t)R * n * V), scores(rows);
  for (float& x : lg) x = nd(rng);
  for (float& x : tl) x = nd(rng);
  for (float& x : dl) x = nd(rng);
  for (int i = 0; i < rows; ++i) scores[i] = 0.1f * (float)i;
  const std::vector<int32_t> offs(kOffsets, kOffsets + R + 1), ids(kTokenIds, kTokenIds + R * kTop),
      nids(kNumTokenIds, kNumTokenIds + R), committed_v = committed(V),
      nvalid(kNumValid, kNumValid + R), counts(kCounts, kCounts + R), drafts_v = drafts(V);
  const std::vector<float> thr(kThresholds, kThresholds + R), fac(kFactors, kFactors + R),
      pt(kPositionTemps, kPositionTemps + R);
  const std::vector<int32_t> policies = {1, 2, 0, 0};
  std::vector<int32_t> out[2], st[2], vacc[2], vtok[2], vst[2], rst[2];
  std::vector<uint8_t> rev[2];
  for (int b = 0; b < 2; ++b) {
    Call k(b == 0 ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA);
    dds_sampler* s = make(k.backend, V);
    out[b].assign((size_t)R * 2 * E, -7);
    st[b].assign(R, -7);
    dds_stash_args a;
    dds_stash_args_init(&a, sizeof a);
    a.num_rows = rows;
    a.num_requests = R;
    a.row_offsets = k.in(offs);
    a.logits = k.in(lg);
    a.token_ids = k.in(ids);
    a.num_token_ids = k.in(nids);
    a.committed_tokens = k.in(committed_v);
    a.num_valid = k.in(nvalid);
    a.num_top = kTop;
    a.num_slots = R;
    a.rows_per_slot = 2;
    a.out_token_ids = k.out(out[b]);
    a.request_status = k.out(st[b]);
    REQUIRE(dds_stash_logprobs(s, &a, nullptr) == DDS_OK);
    vacc[b].assign(R, -7);
    vtok[b].assign((size_t)R * (n + 1), -7);
    vst[b].assign(R, -7);
    dds_verify_args v;
    dds_verify_args_init(&v, sizeof v);
    set_verify(&v, R, n, k.in(counts), k.in(drafts_v), k.in(dl), k.in(tl), k.out(vacc[b]),
               k.out(vtok[b]));
    v.request_status = k.out(vst[b]);
    REQUIRE(dds_verify_drafts(s, &v, nullptr) == DDS_OK);
    rev[b].assign(rows, 0xee);
    rst[b].assign(R, -7);
    dds_reveal_args r;
    dds_reveal_args_init(&r, sizeof r);
    r.num_rows = rows;
    r.num_requests = R;
    r.row_offsets = a.row_offsets;
    r.scores = k.in(scores);
    r.policies = k.in(policies);
    r.thresholds = k.in(thr);
    r.factors = k.in(fac);
    r.position_temperatures = k.in(pt);
    r.reveal = k.out(rev[b]);
    r.request_status = k.out(rst[b]);
    REQUIRE(dds_reveal(s, &r, nullptr) == DDS_OK);
    k.fetch();
    dds_destroy(s);
  }
  CHECK(out[0] == out[1]);
  CHECK(st[0] == st[1]);
  CHECK(st[1] == std::vector<int32_t>(kStashStatus, kStashStatus + R));
  CHECK(vacc[0] == vacc[1]);
  CHECK(vtok[0] == vtok[1]);
  CHECK(vst[0] == vst[1]);
  CHECK(vst[1] == std::vector<int32_t>(kVerifyStatus, kVerifyStatus + R));
  CHECK(rev[0] == rev[1]);
  CHECK(rst[0] == rst[1]);
  CHECK(rst[1] == std::vector<int32_t>(kRevealStatus, kRevealStatus + R));
}
