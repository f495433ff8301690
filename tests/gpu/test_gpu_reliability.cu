// GPU reliability tests (issue 11), public API only, every result against the CPU oracle (the
// device-side faults, debug mode, host pointers and stash hostile cases: test_gpu_faults.cu; the
// helpers both share: reliability_common.h):
//  - concurrency: 4 host threads, each with its own CUDA sampler and its own non-blocking stream,
//    50 dds_sample calls each (plus a dds_stash_logprobs every 5th call that reads the tokens of
//    the call before it on the same stream), all in flight together, no synchronisation until the
//    end; every row checked against the CPU backend (near-ties bounded at 0.1% of the rows);
//  - hostile numbers: rows of all -inf / NaN / banned (token 0, DDS_REQ_EMPTY_ROW) at V = 9, 3000
//    and 262144; NaN logits; +inf logits (FLT_MAX, ties in one block and across blocks);
//    temperatures 1e30, FLT_MAX, 1e-30 and denormal (greedy); l * (1/T) overflowing to -inf;
//    guidance scales that overflow; k > V; p <= 0; p > 1; min-p >= 1; denormal logits in f32,
//    bf16, f16; a hostile batch at V = 32001.
// Every output is poisoned before each call (unwritten elements show up as mismatches). Device
// memory stays under ~250 MB; every buffer that is read back is written first (initcheck).
#include "gpu_main.h"  // first: doctest implementation + main that skips without a device

#include <atomic>
#include <mutex>
#include <thread>

#include "reliability_common.h"

namespace {

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
    const int32_t n = c.offs[r + 1] - c.offs[r], which = (r + call) % 15;
    // sample_rows::mixed's 13 settings, and two more: huge T with k > V, tiny T with min-p > 1.
    sample_rows::Settings q;
    if (which < 13) q = sample_rows::mixed(which, c.offs[r], n, c.unrows, rng);
    if (which == 13) q.T = 1e30f, q.k = V + 1;
    if (which == 14) q.T = 1e-30f, q.k = 5, q.mp = 2.f;
    sample_rows::push(c, q);
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
