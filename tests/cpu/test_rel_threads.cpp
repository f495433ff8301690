// Reliability: dds from several threads at once (issue 11). Run under ThreadSanitizer by
// scripts/ci-reliability.sh.
//
// The rule (include/dds/dds.h): different samplers may be used from different threads
// concurrently; one sampler must not be used by two threads at the same time, and the library
// detects overlapping calls on one sampler and returns DDS_ERR_BUSY (writing nothing). Error
// messages are thread-local.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "test_util.h"

using namespace tu;

namespace {

constexpr int32_t kV = 1500;  // two 1024-token blocks
constexpr int32_t kRows = 6;
constexpr int32_t kReqs = 3;
constexpr int32_t kTop = 4;

// One self-contained job: inputs and per-request settings of a dds_sample and a
// dds_stash_logprobs call, and the outputs of both.
struct Job {
  std::vector<float> logits, uncond, temps, gs, ps, mps;
  std::vector<int32_t> offs, uoffs, ks, pos;
  std::vector<uint64_t> seeds;
  // outputs
  std::vector<int32_t> tokens, argmax, status, st_ids, st_ranks, st_status;
  std::vector<float> logprobs, confidence, margin, entropy, probs, st_vals;

  explicit Job(uint64_t id) {
    std::mt19937_64 rng(0x5eed0000 + id);
    std::normal_distribution<float> nd(0.f, 2.f + (float)(id % 3));
    logits.resize((size_t)kRows * kV);
    uncond.resize((size_t)kRows * kV);
    for (auto& v : logits) v = nd(rng);
    for (auto& v : uncond) v = nd(rng);
    logits[(size_t)(id % kRows) * kV + id % kV] = kNaN;  // a hostile value now and then
    offs = {0, 1, 4, kRows};
    uoffs = {0, -1, 1};
    temps = {1.f, 0.7f, (id % 4) == 0 ? 0.f : 1.3f};
    gs = {0.5f, 0.f, 1.5f};
    ks = {0, 50, (int32_t)(id % 7)};
    ps = {0.9f, 1.f, 0.5f};
    mps = {0.f, 0.05f, 0.f};
    seeds = {id, id * 31 + 7, ~id};
    for (int32_t i = 0; i < kRows; ++i) pos.push_back((int32_t)((id * 13 + i * 5) % 97));
    reset();
  }
  void reset() {
    tokens.assign(kRows, kPoisonI);
    argmax.assign(kRows, kPoisonI);
    status.assign(kReqs, kPoisonI);
    logprobs.assign(kRows, kPoisonF);
    confidence.assign(kRows, kPoisonF);
    margin.assign(kRows, kPoisonF);
    entropy.assign(kRows, kPoisonF);
    probs.assign((size_t)kRows * kV, kPoisonF);
    st_ids.assign((size_t)kReqs * kRows * (kTop + 1), kPoisonI);
    st_ranks.assign(st_ids.size(), kPoisonI);
    st_vals.assign(st_ids.size(), kPoisonF);
    st_status.assign(kReqs, kPoisonI);
  }
  dds_sample_args sample() {
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = kRows;
    a.num_requests = kReqs;
    a.row_offsets = offs.data();
    a.positions = pos.data();
    a.logits = logits.data();
    a.uncond_logits = uncond.data();
    a.uncond_num_rows = kRows;
    a.uncond_row_offsets = uoffs.data();
    a.guidance_scales = gs.data();
    a.temperatures = temps.data();
    a.top_ks = ks.data();
    a.top_ps = ps.data();
    a.min_ps = mps.data();
    a.seeds = seeds.data();
    a.tokens = tokens.data();
    a.logprobs = logprobs.data();
    a.argmax = argmax.data();
    a.confidence = confidence.data();
    a.margin = margin.data();
    a.entropy = entropy.data();
    a.probs = probs.data();
    a.request_status = status.data();
    return a;
  }
  dds_stash_args stash() {
    dds_stash_args a;
    dds_stash_args_init(&a, sizeof a);
    a.num_rows = kRows;
    a.num_requests = kReqs;
    a.row_offsets = offs.data();
    a.logits = logits.data();
    a.temperatures = temps.data();
    a.num_top = kTop;
    a.num_slots = kReqs;
    a.rows_per_slot = kRows;
    a.out_token_ids = st_ids.data();
    a.out_logprobs = st_vals.data();
    a.out_ranks = st_ranks.data();
    a.request_status = st_status.data();
    return a;
  }
  // Bitwise equality of every output (NaN-safe: compares bytes).
  bool same_as(const Job& o) const {
    auto eq = [](const auto& x, const auto& y) {
      return x.size() == y.size() &&
             std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
    };
    return eq(tokens, o.tokens) && eq(argmax, o.argmax) && eq(status, o.status) &&
           eq(logprobs, o.logprobs) && eq(confidence, o.confidence) && eq(margin, o.margin) &&
           eq(entropy, o.entropy) && eq(probs, o.probs) && eq(st_ids, o.st_ids) &&
           eq(st_ranks, o.st_ranks) && eq(st_vals, o.st_vals) && eq(st_status, o.st_status);
  }
  bool sample_untouched() const {
    Job fresh(0);
    return std::memcmp(tokens.data(), fresh.tokens.data(), tokens.size() * 4) == 0 &&
           std::memcmp(probs.data(), fresh.probs.data(), probs.size() * 4) == 0 &&
           std::memcmp(status.data(), fresh.status.data(), status.size() * 4) == 0;
  }
  bool stash_untouched() const {
    Job fresh(0);
    return std::memcmp(st_ids.data(), fresh.st_ids.data(), st_ids.size() * 4) == 0 &&
           std::memcmp(st_vals.data(), fresh.st_vals.data(), st_vals.size() * 4) == 0;
  }
};

dds_sampler* make_sampler() {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.vocab_size = kV;
  c.max_rows = kRows;
  c.max_requests = kReqs;
  c.max_stash_width = kTop;
  dds_sampler* s = nullptr;
  if (dds_create(&c, &s) != DDS_OK) return nullptr;
  return s;
}

// Reference outputs of jobs 0..n-1, computed one after the other on one sampler.
std::vector<Job> reference(int n) {
  std::vector<Job> ref;
  dds_sampler* s = make_sampler();
  REQUIRE(s != nullptr);
  for (int j = 0; j < n; ++j) {
    ref.emplace_back((uint64_t)j);
    dds_sample_args a = ref.back().sample();
    REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
    dds_stash_args b = ref.back().stash();
    REQUIRE(dds_stash_logprobs(s, &b, nullptr) == DDS_OK);
  }
  dds_destroy(s);
  return ref;
}

}  // namespace

TEST_CASE("one sampler per thread: concurrent results equal the sequential ones, bit for bit") {
  constexpr int kThreads = 4, kJobsPerThread = 6, kRounds = 2;
  const std::vector<Job> ref = reference(kThreads * kJobsPerThread);
  std::atomic<int> ready{0};
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> th;
  for (int w = 0; w < kThreads; ++w) {
    th.emplace_back([&, w] {
      dds_sampler* s = make_sampler();
      if (!s) {
        ++failures;
        return;
      }
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      for (int round = 0; round < kRounds; ++round) {
        for (int j = 0; j < kJobsPerThread; ++j) {
          const int id = w * kJobsPerThread + (j + round) % kJobsPerThread;
          Job job((uint64_t)id);
          dds_sample_args a = job.sample();
          dds_stash_args b = job.stash();
          if (dds_sample(s, &a, nullptr) != DDS_OK || dds_stash_logprobs(s, &b, nullptr) != DDS_OK)
            ++failures;
          else if (!job.same_as(ref[id]))
            ++mismatches;
        }
      }
      dds_destroy(s);
    });
  }
  for (auto& t : th) t.join();
  CHECK(failures.load() == 0);
  CHECK(mismatches.load() == 0);
}

TEST_CASE("one sampler shared by threads: DDS_OK with correct results, or DDS_ERR_BUSY writing nothing") {
  constexpr int kThreads = 3, kMinCalls = 60;
  const std::vector<Job> ref = reference(kThreads);
  dds_sampler* s = make_sampler();
  REQUIRE(s != nullptr);
  std::atomic<int> ok{0}, busy{0}, wrong{0}, other{0}, written_on_busy{0}, bad_msg{0};
  std::atomic<int> ready{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::thread> th;
  for (int w = 0; w < kThreads; ++w) {
    th.emplace_back([&, w] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int call = 0;; ++call) {
        // Enough calls, and (to show the detection works) until some call saw DDS_ERR_BUSY.
        if (call >= kMinCalls && (busy.load() > 0 || std::chrono::steady_clock::now() > deadline))
          break;
        Job job((uint64_t)w);
        const bool stash = (call % 3) == 2;
        dds_status st;
        if (stash) {
          dds_stash_args b = job.stash();
          st = dds_stash_logprobs(s, &b, nullptr);
        } else {
          dds_sample_args a = job.sample();
          st = dds_sample(s, &a, nullptr);
        }
        if (st == DDS_OK) {
          ++ok;
          // The other half of the outputs was not asked for: compare what was.
          const Job& r = ref[w];
          const bool same =
              stash ? (job.st_ids == r.st_ids && job.st_ranks == r.st_ranks &&
                       std::memcmp(job.st_vals.data(), r.st_vals.data(), job.st_vals.size() * 4) == 0)
                    : (job.tokens == r.tokens && job.argmax == r.argmax && job.status == r.status &&
                       std::memcmp(job.probs.data(), r.probs.data(), job.probs.size() * 4) == 0);
          if (!same) ++wrong;
        } else if (st == DDS_ERR_BUSY) {
          ++busy;
          if (stash ? !job.stash_untouched() : !job.sample_untouched()) ++written_on_busy;
          const std::string msg = dds_last_error();
          if (msg.find("in use") == std::string::npos || msg.find("sampler") == std::string::npos)
            ++bad_msg;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& t : th) t.join();
  MESSAGE("shared sampler: " << ok.load() << " DDS_OK, " << busy.load() << " DDS_ERR_BUSY");
  CHECK(other.load() == 0);
  CHECK(wrong.load() == 0);
  CHECK(written_on_busy.load() == 0);
  CHECK(bad_msg.load() == 0);
  CHECK(ok.load() > 0);
  CHECK(busy.load() > 0);  // overlapping calls are detected
  // The sampler is free again afterwards and still correct.
  Job job(0);
  dds_sample_args a = job.sample();
  REQUIRE(dds_sample(s, &a, nullptr) == DDS_OK);
  CHECK(job.tokens == ref[0].tokens);
  dds_destroy(s);
}

TEST_CASE("samplers created, used and destroyed in many threads at once; errors stay thread-local") {
  constexpr int kThreads = 4, kIters = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> th;
  for (int w = 0; w < kThreads; ++w) {
    th.emplace_back([&, w] {
      for (int it = 0; it < kIters; ++it) {
        dds_sampler_config c;
        dds_sampler_config_init(&c, sizeof c);
        c.vocab_size = 5 + w;
        dds_sampler* s = nullptr;
        if (dds_create(&c, &s) != DDS_OK) {
          ++failures;
          continue;
        }
        std::vector<float> row(5 + w, 0.f);
        row[(size_t)(w + it) % row.size()] = 3.f;
        int32_t tok = -1;
        dds_sample_args a;
        dds_sample_args_init(&a, sizeof a);
        a.num_rows = 1;
        a.logits = row.data();
        a.temperature = 0.f;
        a.tokens = &tok;
        if (w % 2 == 0) {
          // Even threads fail on purpose; their message names their own bad value.
          a.banned_token = -100 - w;
          if (dds_sample(s, &a, nullptr) != DDS_ERR_INVALID_ARGUMENT) ++failures;
          const std::string want = "(" + std::to_string(-100 - w) + ")";
          if (std::string(dds_last_error()).find(want) == std::string::npos) ++failures;
          if (tok != -1) ++failures;
        } else {
          // Odd threads succeed; a success leaves this thread's message empty.
          if (dds_sample(s, &a, nullptr) != DDS_OK) ++failures;
          if (tok != (w + it) % (int)row.size()) ++failures;
          if (dds_last_error()[0] != '\0') ++failures;
        }
        dds_destroy(s);
      }
    });
  }
  for (auto& t : th) t.join();
  CHECK(failures.load() == 0);
}
