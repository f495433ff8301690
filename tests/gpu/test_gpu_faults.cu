// GPU reliability tests (issue 11), the faults, public API only, every result against the CPU
// oracle (the concurrency and hostile-number cases: test_gpu_reliability.cu; the helpers both
// share: reliability_common.h):
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

#include "reliability_common.h"

// =============================================================================================
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
