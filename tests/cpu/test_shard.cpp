// Vocabulary-parallel sampling (include/dds/dds_shard.h): R simulated ranks on column slices of
// one logits matrix, the all-gather done by memcpy. Sharded tokens and statistics must equal the
// unsharded dds_sample (tokens identical except counted near-ties; here the count must be 0).
#include <dds/dds_shard.h>

#include "hostile_cases.h"
#include "test_util.h"

using namespace tu;

namespace {

struct Slice {
  int32_t off, len;
};

// Slices of [0, V) for R ranks: "even" (unaligned split), "aligned" (block multiples where
// possible), "tiny" (several slices smaller than a block, a block spanning more than two ranks).
std::vector<Slice> make_slices(int32_t V, int32_t R, const char* mode, uint64_t seed) {
  std::vector<int32_t> cuts;  // R - 1 interior cut points, strictly increasing
  if (std::strcmp(mode, "even") == 0) {
    for (int32_t r = 1; r < R; ++r) cuts.push_back((int32_t)((int64_t)V * r / R));
  } else if (std::strcmp(mode, "aligned") == 0) {
    const int32_t nb = (V + 1023) / 1024;
    for (int32_t r = 1; r < R; ++r) {
      int32_t c = (int32_t)((int64_t)nb * r / R) * 1024;
      if (c <= (cuts.empty() ? 0 : cuts.back()) || c >= V) c = (int32_t)((int64_t)V * r / R);
      cuts.push_back(c);
    }
  } else {  // tiny: random cuts, most slices small
    std::mt19937_64 rng(seed);
    std::vector<int32_t> all;
    for (int32_t r = 1; r < R; ++r) {
      int32_t c;
      do {
        c = 1 + (int32_t)(rng() % (uint64_t)std::min(V - 1, 1500));
      } while (std::find(all.begin(), all.end(), c) != all.end());
      all.push_back(c);
    }
    std::sort(all.begin(), all.end());
    cuts = all;
  }
  std::vector<Slice> s;
  int32_t prev = 0;
  for (int32_t c : cuts) {
    s.push_back({prev, c - prev});
    prev = c;
  }
  s.push_back({prev, V - prev});
  for (const Slice& x : s) REQUIRE(x.len >= 1);
  return s;
}

// Copies columns [off, off + len) of rows [rows, V] (elements of esz bytes) into [rows, stride].
std::vector<uint64_t> slice_cols(const void* full, size_t esz, int32_t V, int32_t rows, Slice sl,
                                 int32_t stride) {
  std::vector<uint64_t> out(((size_t)rows * stride * esz + 7) / 8 + 1, 0x7fc000007fc00000ull);
  const char* src = static_cast<const char*>(full);
  char* dst = reinterpret_cast<char*>(out.data());
  for (int32_t i = 0; i < rows; ++i)
    std::memcpy(dst + ((size_t)i * stride) * esz, src + ((size_t)i * V + sl.off) * esz, esz * sl.len);
  return out;
}

float load_any(const void* p, int32_t dtype, size_t idx) {
  if (dtype == DDS_DTYPE_F32) return static_cast<const float*>(p)[idx];
  const uint16_t h = static_cast<const uint16_t*>(p)[idx];
  return dtype == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
}

struct ShardRun {
  Outputs out;         // rank 0's outputs (checked equal on every rank)
  std::vector<float> probs;  // assembled [rows, V] from the ranks' slices (when asked)
  dds_shard_plan plan;
  ShardRun(int32_t rows, int32_t reqs) : out(rows, reqs) {}
};

// Runs the whole protocol. `a` is the unsharded call (full logits [rows, V], uncond [urows, V]);
// rank i gets slices[perm[i]]. Checks that every rank's outputs are identical.
ShardRun run_sharded(int32_t V, const dds_sample_args& a, const std::vector<Slice>& slices,
                     bool reverse_ranks, int32_t max_top_k, bool want_probs,
                     int32_t probs_dtype = DDS_DTYPE_F32) {
  const int32_t R = (int32_t)slices.size(), rows = a.num_rows;
  Sampler s(V, std::max(rows, 1), std::max(a.num_requests, 1));
  std::vector<int32_t> perm(R);
  for (int32_t i = 0; i < R; ++i) perm[i] = reverse_ranks ? R - 1 - i : i;
  const size_t esz = a.dtype == DDS_DTYPE_F32 ? 4 : 2, pesz = probs_dtype == DDS_DTYPE_F32 ? 4 : 2;
  std::vector<std::vector<uint64_t>> lg(R), ul(R), probs(R);
  std::vector<dds_sample_args> args(R, a);
  std::vector<dds_shard_args> sh(R);
  std::vector<Outputs> outs;
  for (int32_t i = 0; i < R; ++i) {
    const Slice sl = slices[perm[i]];
    const int32_t stride = sl.len + 3;
    lg[i] = slice_cols(a.logits, esz, V, rows, sl, stride);
    args[i].logits = lg[i].data();
    args[i].row_stride = stride;
    if (a.uncond_logits) {
      ul[i] = slice_cols(a.uncond_logits, esz, V, a.uncond_num_rows, sl, stride + 1);
      args[i].uncond_logits = ul[i].data();
      args[i].uncond_row_stride = stride + 1;
    }
    REQUIRE(dds_shard_args_init(&sh[i], sizeof sh[i]) == DDS_OK);
    sh[i].rank = i;
    sh[i].world_size = R;
    sh[i].vocab_offset = sl.off;
    sh[i].vocab_slice = sl.len;
    sh[i].max_top_k = max_top_k;
    outs.emplace_back(rows, a.num_requests);
    outs.back().attach(&args[i]);
    if (want_probs) {
      probs[i].assign(((size_t)rows * (sl.len + 2) * pesz + 7) / 8 + 1, 0x5a5a5a5a5a5a5a5aull);
      args[i].probs = probs[i].data();
      args[i].probs_dtype = probs_dtype;
      args[i].probs_row_stride = sl.len + 2;
    }
  }
  ShardRun res(rows, a.num_requests);
  res.plan.struct_size = sizeof res.plan;
  {
    const dds_status st = dds_sample_shard_plan(s, &args[0], &sh[0], &res.plan);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
  }
  const dds_shard_plan& plan = res.plan;
  std::vector<uint64_t> gathered((size_t)plan.gathered_bytes / 8 + 1, 0x5a5a5a5a5a5a5a5aull);
  unsigned char* g = reinterpret_cast<unsigned char*>(gathered.data());
  for (int32_t q = 0; q < plan.num_rounds; ++q) {
    for (int32_t i = 0; i < R; ++i) {
      dds_shard_plan p2;
      p2.struct_size = sizeof p2;
      REQUIRE(dds_sample_shard_plan(s, &args[i], &sh[i], &p2) == DDS_OK);
      REQUIRE(p2.gathered_bytes == plan.gathered_bytes);
      size_t bytes = 0;
      REQUIRE(dds_sample_record_bytes(s, &args[i], &sh[i], q, &bytes) == DDS_OK);
      REQUIRE((int64_t)bytes == plan.record_bytes[q]);
      std::vector<uint64_t> rec(bytes / 8 + 1, 0xa5a5a5a5a5a5a5a5ull);
      sh[i].round = q;
      const dds_status st = dds_sample_partial(s, &args[i], &sh[i], q ? g : nullptr, rec.data(), nullptr);
      INFO(dds_last_error());
      REQUIRE(st == DDS_OK);
      std::memcpy(g + plan.gathered_offset[q] + (int64_t)i * plan.record_bytes[q], rec.data(), bytes);
    }
  }
  for (int32_t i = 0; i < R; ++i) {
    const dds_status st = dds_sample_finish(s, &args[i], &sh[i], g, nullptr);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
  }
  for (int32_t i = 1; i < R; ++i) {
    CHECK(outs[i].tokens == outs[0].tokens);
    CHECK(outs[i].argmax == outs[0].argmax);
    CHECK(outs[i].status == outs[0].status);
    for (int32_t r = 0; r < rows; ++r) {
      CHECK(std::memcmp(&outs[i].logprobs[r], &outs[0].logprobs[r], 4) == 0);
      CHECK(std::memcmp(&outs[i].entropy[r], &outs[0].entropy[r], 4) == 0);
      CHECK(std::memcmp(&outs[i].margin[r], &outs[0].margin[r], 4) == 0);
      CHECK(std::memcmp(&outs[i].confidence[r], &outs[0].confidence[r], 4) == 0);
    }
  }
  res.out = outs[0];
  if (want_probs) {
    res.probs.assign((size_t)rows * V, kPoisonF);
    for (int32_t i = 0; i < R; ++i) {
      const Slice sl = slices[perm[i]];
      for (int32_t r = 0; r < rows; ++r)
        for (int32_t t = 0; t < sl.len; ++t)
          res.probs[(size_t)r * V + sl.off + t] =
              load_any(probs[i].data(), probs_dtype, (size_t)r * (sl.len + 2) + t);
    }
  }
  return res;
}

bool close(float x, float y) {
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs((double)x - (double)y) <= 1e-6 * std::fabs((double)y) + 1e-7;
}

// Compares a sharded run with the unsharded one; returns the number of differing tokens.
int compare(const Outputs& sh, const Outputs& ref, int32_t rows) {
  int diff = 0;
  for (int32_t r = 0; r < rows; ++r) {
    diff += sh.tokens[r] != ref.tokens[r];
    CHECK(sh.argmax[r] == ref.argmax[r]);
    if (sh.tokens[r] != ref.tokens[r]) continue;
    INFO("row " << r << " logprob " << sh.logprobs[r] << " vs " << ref.logprobs[r]);
    CHECK(close(sh.logprobs[r], ref.logprobs[r]));
    CHECK(close(sh.confidence[r], ref.confidence[r]));
    CHECK(close(sh.margin[r], ref.margin[r]));
    INFO("entropy " << sh.entropy[r] << " vs " << ref.entropy[r]);
    CHECK(close(sh.entropy[r], ref.entropy[r]));
  }
  CHECK(sh.status == ref.status);
  return diff;
}

// A mixed test matrix of rows: gaussian of various sigmas, quantised (ties), -inf columns,
// constant rows, a row with one finite column, an all -inf row.
std::vector<float> make_logits(int32_t V, int32_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x((size_t)rows * V);
  for (int32_t r = 0; r < rows; ++r) {
    float* p = &x[(size_t)r * V];
    const int kind = r % 8;
    const float sigma = kind == 0 ? 1.f : kind == 1 ? 3.f : kind == 2 ? 8.f : 2.f;
    std::normal_distribution<float> nd(0.f, sigma);
    for (int32_t t = 0; t < V; ++t) p[t] = nd(rng);
    if (kind == 3)  // ties
      for (int32_t t = 0; t < V; ++t) p[t] = std::round(p[t] * 2.f) / 2.f;
    if (kind == 4)  // -inf columns, a NaN, a +inf-free spike
      for (int32_t t = 0; t < V; ++t)
        if (rng() % 3 == 0) p[t] = -kInf;
    if (kind == 5)  // constant row
      for (int32_t t = 0; t < V; ++t) p[t] = 0.5f;
    if (kind == 6) {  // one finite column
      for (int32_t t = 0; t < V; ++t) p[t] = -kInf;
      p[(r * 977) % V] = 1.f;
    }
    if (kind == 7 && r % 16 == 15)  // empty row
      for (int32_t t = 0; t < V; ++t) p[t] = -kInf;
    if (kind == 7 && r % 16 == 7 && V > 10) {  // NaN (-> -inf) and +inf (-> FLT_MAX) columns
      p[3] = kNaN;
      p[V - 2] = kInf;
      p[V / 2] = kInf;
    }
  }
  return x;
}

struct Config {
  const char* name;
  float T;
  int32_t k;
  float p;
  float min_p;
  bool guided;
  int32_t stats;
};

const Config kConfigs[] = {
    {"plain", 1.f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"temp", 0.7f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"greedy", 0.f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"greedy-guided-stats", 0.f, 0, 1.f, 0.f, true, DDS_STATS_GUIDED},
    {"top-k 1", 1.f, 1, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-k 50", 1.f, 50, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-k 64", 1.3f, 64, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0.9", 1.f, 0, 0.9f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0.5", 1.f, 0, 0.5f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0.999", 1.f, 0, 0.999f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0", 1.f, 0, 0.f, 0.f, false, DDS_STATS_PROCESSED},
    {"min-p 0.05", 1.f, 0, 1.f, 0.05f, false, DDS_STATS_PROCESSED},
    {"min-p 1", 1.f, 0, 1.f, 1.f, false, DDS_STATS_PROCESSED},
    {"top-k+top-p", 1.f, 40, 0.8f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-k+top-p+min-p", 0.8f, 60, 0.95f, 0.02f, false, DDS_STATS_PROCESSED},
    {"top-p+min-p", 1.f, 0, 0.9f, 0.1f, false, DDS_STATS_PROCESSED},
    {"guided", 1.f, 0, 1.f, 0.f, true, DDS_STATS_PROCESSED},
    {"guided top-p", 1.f, 0, 0.9f, 0.f, true, DDS_STATS_PROCESSED},
    {"guided top-k stats guided", 0.9f, 20, 1.f, 0.f, true, DDS_STATS_GUIDED},
    {"top-p stats guided", 1.f, 0, 0.7f, 0.f, false, DDS_STATS_GUIDED},
};

void run_case(int32_t V, int32_t rows, int32_t R, const char* mode, const Config& cfg,
              bool reverse, bool probs, uint64_t seed, int* total_diff) {
  std::vector<float> logits = make_logits(V, rows, seed);
  std::vector<float> uncond = make_logits(V, rows, seed + 1);
  for (float& u : uncond)
    if (u == -kInf) u = 0.f;  // keep most guided rows non-empty
  dds_sample_args a = sample_args();
  a.num_rows = rows;
  a.num_requests = rows;
  a.logits = logits.data();
  a.temperature = cfg.T;
  a.top_k = cfg.k;
  a.top_p = cfg.p;
  a.min_p = cfg.min_p;
  a.seed = 1234 + seed;
  a.step = 7;
  a.stats = cfg.stats;
  a.banned_token = V / 3;
  if (cfg.guided) {
    a.uncond_logits = uncond.data();
    a.uncond_num_rows = rows;
    a.guidance_scale = 1.5f;
  }
  Sampler s(V, rows, rows);
  Outputs ref = probs ? run_sample_probs(s, a, V) : run_sample(s, a);
  const std::vector<Slice> sl = make_slices(V, R, mode, seed);
  ShardRun sr = run_sharded(V, a, sl, reverse, 64, probs);
  INFO("V " << V << " R " << R << " mode " << mode << " config " << cfg.name);
  const int diff = compare(sr.out, ref, rows);
  *total_diff += diff;
  CHECK(diff == 0);
  if (probs) {
    for (size_t e = 0; e < sr.probs.size(); ++e) {
      if (sr.out.tokens[e / V] != ref.tokens[e / V]) continue;
      if (!close(sr.probs[e], ref.probs[e])) {
        FAIL_CHECK("probs[" << e << "] " << sr.probs[e] << " vs " << ref.probs[e]);
        break;
      }
    }
  }
}

}  // namespace

TEST_CASE("shard: plan rounds and sizes") {
  Sampler s(3000);
  std::vector<float> lg(3000);
  dds_sample_args a = basic_args(lg, 1);
  a.tokens = nullptr;
  dds_shard_args sh;
  REQUIRE(dds_shard_args_init(&sh, sizeof sh) == DDS_OK);
  CHECK(sh.world_size == 1);
  CHECK(sh.max_top_k == 64);
  sh.vocab_slice = 3000;
  dds_shard_plan p;
  p.struct_size = sizeof p;
  REQUIRE(dds_sample_shard_plan(s, &a, &sh, &p) == DDS_OK);
  CHECK(p.num_rounds == 1);
  CHECK(p.round_kind[0] == DDS_SHARD_ROUND_STATS);
  CHECK(p.row_bytes[0] == 216);
  a.top_k = 10;
  REQUIRE(dds_sample_shard_plan(s, &a, &sh, &p) == DDS_OK);
  CHECK(p.num_rounds == 2);
  CHECK(p.row_bytes[0] == 216 + 8 * 64);
  CHECK(p.round_kind[1] == DDS_SHARD_ROUND_KEPT);
  CHECK(p.row_bytes[1] == 152);
  a.top_k = 0;
  a.top_p = 0.9f;
  sh.world_size = 4;
  sh.vocab_slice = 750;
  REQUIRE(dds_sample_shard_plan(s, &a, &sh, &p) == DDS_OK);
  CHECK(p.num_rounds == 6);
  for (int q = 1; q <= 4; ++q) CHECK(p.round_kind[q] == DDS_SHARD_ROUND_RADIX);
  CHECK(p.round_kind[5] == DDS_SHARD_ROUND_KEPT);
  CHECK(p.gathered_offset[1] == 4 * 216);
  CHECK(p.gathered_bytes == 4 * (216 + 4 * 3072 + 152));
}

TEST_CASE("shard: R = 1, 2, 3, 4, 8, aligned / unaligned / tiny slices, every filter") {
  int total_diff = 0;
  const int32_t Rs[] = {1, 2, 3, 4, 8};
  const char* modes[] = {"even", "aligned", "tiny"};
  uint64_t seed = 1;
  for (int32_t R : Rs)
    for (const char* mode : modes) {
      if (R == 1 && std::strcmp(mode, "even") != 0) continue;
      for (const Config& cfg : kConfigs) {
        const int32_t V = (seed % 2) ? 3001 : 4096;
        run_case(V, 16, R, mode, cfg, seed % 3 == 0, false, seed, &total_diff);
        ++seed;
      }
    }
  MESSAGE("near-tie token differences: " << total_diff);
  CHECK(total_diff == 0);
}

TEST_CASE("shard: 151936 / 8 = 18992-column slices, bf16-sized rows, probs") {
  int total_diff = 0;
  run_case(151936, 4, 8, "even", kConfigs[0], false, false, 77, &total_diff);
  run_case(151936, 4, 8, "even", kConfigs[7], true, false, 78, &total_diff);
  run_case(151936, 4, 8, "even", kConfigs[14], false, false, 79, &total_diff);
  CHECK(total_diff == 0);
}

TEST_CASE("shard: probs written per slice") {
  int total_diff = 0;
  for (int c : {0, 2, 3, 5, 8, 11, 14, 17, 19})
    run_case(2500, 8, 3, "tiny", kConfigs[c], c % 2 == 0, true, 100 + c, &total_diff);
  CHECK(total_diff == 0);
}

TEST_CASE("shard: mixed per-request parameters, ragged and empty requests, positions, f32/bf16/f16") {
  const int32_t V = 3500, rows = 24, reqs = 7;
  std::vector<float> lf = make_logits(V, rows, 5);
  std::vector<float> un = make_logits(V, 8, 6);
  for (float& u : un)
    if (u == -kInf) u = 0.f;
  std::vector<uint16_t> lb(lf.size()), lh(lf.size()), ub(un.size()), uh(un.size());
  for (size_t e = 0; e < lf.size(); ++e) {
    lb[e] = dds::f32_to_bf16(lf[e]);
    lh[e] = dds::f32_to_f16(lf[e]);
  }
  for (size_t e = 0; e < un.size(); ++e) {
    ub[e] = dds::f32_to_bf16(un[e]);
    uh[e] = dds::f32_to_f16(un[e]);
  }
  std::vector<int32_t> offs = {0, 3, 7, 7, 12, 13, 20, 24}, pos(rows),
                       uoffs = {-1, 0, -1, -1, -1, 1, -1};  // request 2 has no rows
  for (int32_t i = 0; i < rows; ++i) pos[i] = (i * 37) % 50;
  std::vector<float> T = {1.f, 0.9f, 1.f, 0.f, 1.2f, 1.f, 0.6f},
                     G = {0, 2.f, 0, 0, 0, 1.f, 0};
  std::vector<int32_t> K = {0, 30, 0, 0, 64, 5000, 1};
  std::vector<float> P = {0.9f, 1.f, 1.f, 0.5f, 0.95f, 0.3f, 1.f},
                     MP = {0.f, 0.05f, 0.f, 0.f, 0.f, 0.01f, 0.f};
  std::vector<uint64_t> seeds = {1, 2, 0, 3, 4, 5, 6};
  std::vector<uint32_t> steps = {0, 1, 0, 2, 3, 4, 5};
  for (int pass = 0; pass < 6; ++pass) {
    const int32_t dtype = pass / 2;
    dds_sample_args a = sample_args();
    a.dtype = dtype;
    a.num_rows = rows;
    a.num_requests = reqs;
    a.row_offsets = offs.data();
    a.positions = pos.data();
    a.logits = dtype == DDS_DTYPE_F32    ? (const void*)lf.data()
               : dtype == DDS_DTYPE_BF16 ? (const void*)lb.data()
                                         : (const void*)lh.data();
    a.uncond_logits = dtype == DDS_DTYPE_F32    ? (const void*)un.data()
                      : dtype == DDS_DTYPE_BF16 ? (const void*)ub.data()
                                                : (const void*)uh.data();
    a.uncond_num_rows = 8;
    a.uncond_row_offsets = uoffs.data();
    a.temperatures = T.data();
    a.guidance_scales = G.data();
    a.top_ks = K.data();
    a.top_ps = P.data();
    a.min_ps = MP.data();
    a.seeds = seeds.data();
    a.steps = steps.data();
    a.stats = pass % 2 ? DDS_STATS_GUIDED : DDS_STATS_PROCESSED;
    Sampler s(V, rows, reqs);
    Outputs ref = run_sample(s, a);
    for (int32_t R : {2, 5}) {
      ShardRun sr = run_sharded(V, a, make_slices(V, R, R == 2 ? "even" : "tiny", 9), R == 5, 64,
                                false);
      CHECK(compare(sr.out, ref, rows) == 0);
    }
  }
}

TEST_CASE("shard: hostile row_offsets (tests/hostile_cases.h) give dds_sample's rows and bits") {
  const int32_t V = 3500, rows = hostile::kRows, reqs = hostile::kReqs;
  std::vector<float> lf = make_logits(V, rows, 11), un = make_logits(V, rows, 12);
  for (float& u : un)
    if (u == -kInf) u = 0.f;
  const std::vector<float> T = {1.f, 0.7f, 1.3f, 0.f}, G = {1.5f, 0.f, 2.f, 1.f}, P = {1.f, 0.9f, 0.8f, 1.f};
  const std::vector<int32_t> K = {5, 0, 30, 0};
  const std::vector<uint64_t> seeds = {11, 22, 33, 44};
  int32_t nc;
  const hostile::OffsetsCase* cs = hostile::cases(&nc);
  for (int32_t k = 0; k < nc; ++k) {
    for (int guided = 0; guided < 2; ++guided) {
      CAPTURE(cs[k].name);
      CAPTURE(guided);
      dds_sample_args a = sample_args();
      a.num_rows = rows;
      a.num_requests = reqs;
      a.row_offsets = cs[k].offs;
      a.logits = lf.data();
      if (guided) {  // uncond rows mirror the logits rows: flagged requests are never guided
        a.uncond_logits = un.data();
        a.uncond_num_rows = rows;
        a.guidance_scales = G.data();
      }
      a.temperatures = T.data();
      a.top_ks = K.data();
      a.top_ps = P.data();
      a.seeds = seeds.data();
      Sampler s(V, rows, reqs);
      Outputs ref = run_sample(s, a);
      for (int32_t r = 0; r < reqs; ++r)
        CHECK((ref.status[r] & DDS_REQ_BAD_ROW_OFFSETS) == cs[k].flagged[r]);
      for (int32_t R : {2, 5}) {
        ShardRun sr = run_sharded(V, a, make_slices(V, R, R == 2 ? "even" : "tiny", 9), R == 5, 64,
                                  false);
        CHECK(compare(sr.out, ref, rows) == 0);
      }
    }
  }
}

TEST_CASE("shard: tiny vocabularies (V = 1, 7, 1025), one column per rank") {
  int total_diff = 0;
  const int32_t cases[][2] = {{1, 1}, {7, 7}, {7, 3}, {1025, 8}, {1025, 2}};
  uint64_t seed = 300;
  for (const auto& vr : cases)
    for (int c : {0, 2, 5, 7, 11, 14, 16}) {
      run_case(vr[0], 8, vr[1], "even", kConfigs[c], seed % 2 == 0, vr[0] < 100, seed, &total_diff);
      ++seed;
    }
  CHECK(total_diff == 0);
}

TEST_CASE("shard: probs in bf16 and f16") {
  const int32_t V = 2100, rows = 8;
  std::vector<float> lg = make_logits(V, rows, 33);
  for (int c : {0, 8, 14, 17}) {
    dds_sample_args a = sample_args();
    a.num_rows = rows;
    a.num_requests = rows;
    a.logits = lg.data();
    a.temperature = kConfigs[c].T;
    a.top_k = kConfigs[c].k;
    a.top_p = kConfigs[c].p;
    a.min_p = kConfigs[c].min_p;
    a.seed = 5;
    Sampler s(V, rows, rows);
    Outputs ref = run_sample_probs(s, a, V);
    for (int32_t pd : {DDS_DTYPE_BF16, DDS_DTYPE_F16}) {
      ShardRun sr = run_sharded(V, a, make_slices(V, 4, "tiny", 3), true, 64, true, pd);
      CHECK(compare(sr.out, ref, rows) == 0);
      int bad = 0;
      for (size_t e = 0; e < sr.probs.size(); ++e) {
        const float want = pd == DDS_DTYPE_BF16 ? dds::bf16_to_f32(dds::f32_to_bf16(ref.probs[e]))
                                                : dds::f16_to_f32(dds::f32_to_f16(ref.probs[e]));
        bad += std::fabs(sr.probs[e] - want) > 1e-2f * std::fabs(want) + 1e-7f;
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("shard: bad arguments") {
  const int32_t V = 2000;
  Sampler s(V, 4, 4);
  std::vector<float> lg((size_t)2 * 1000, 0.f);
  std::vector<int32_t> tok(2);
  dds_sample_args a = sample_args();
  a.num_rows = 2;
  a.num_requests = 2;
  a.logits = lg.data();
  a.tokens = tok.data();
  dds_shard_args sh;
  REQUIRE(dds_shard_args_init(&sh, sizeof sh) == DDS_OK);
  sh.world_size = 2;
  sh.rank = 0;
  sh.vocab_slice = 1000;
  std::vector<uint64_t> rec(1000), gathered(1000);
  dds_shard_plan plan;
  plan.struct_size = sizeof plan;

  CHECK(dds_shard_args_init(nullptr, sizeof sh) == DDS_ERR_NULL_POINTER);
  CHECK(dds_shard_args_init(&sh, 4) == DDS_ERR_STRUCT_SIZE);
  CHECK(dds_sample_partial(s, &a, nullptr, nullptr, rec.data(), nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "shard is NULL"));
  CHECK(dds_sample_partial(s, &a, &sh, nullptr, nullptr, nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "record_out"));
  {
    dds_shard_plan bad;
    bad.struct_size = 0;
    CHECK(dds_sample_shard_plan(s, &a, &sh, &bad) == DDS_ERR_STRUCT_SIZE);
  }
  {
    dds_shard_args b = sh;
    b.rank = 2;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "shard->rank"));
    b = sh;
    b.world_size = 0;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "shard->world_size"));
    b = sh;
    b.vocab_slice = 0;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "shard->vocab_slice"));
    b = sh;
    b.vocab_offset = 1500;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "shard->vocab_offset"));
    b = sh;
    b.max_top_k = 1025;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "shard->max_top_k"));
    b = sh;
    b.round = 1;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "shard->round"));
    b = sh;
    b.struct_size = 8;
    CHECK(dds_sample_partial(s, &a, &b, nullptr, rec.data(), nullptr) == DDS_ERR_STRUCT_SIZE);
  }
  {
    dds_sample_args b = a;
    b.row_stride = 999;
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "args->row_stride"));
    b = a;
    b.logits = nullptr;
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_ERR_NULL_POINTER);
    CHECK(contains(dds_last_error(), "args->logits"));
    b = a;
    b.banned_token = V;
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "args->banned_token"));
    b = a;
    b.top_k = 65;  // > max_top_k and < V
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_ERR_UNSUPPORTED);
    CHECK(contains(dds_last_error(), "args->top_k"));
    b.top_k = V;  // off
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_OK);
    std::vector<int32_t> ks = {3, 100};
    b = a;
    b.top_ks = ks.data();
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_ERR_UNSUPPORTED);
    CHECK(contains(dds_last_error(), "args->top_ks[1]"));
    b = a;
    b.num_rows = 5;
    b.num_requests = 5;
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, rec.data(), nullptr) == DDS_ERR_CAPACITY);
  }
  // finish: gathered missing, garbage, slices not partitioning [0, V).
  CHECK(dds_sample_finish(s, &a, &sh, nullptr, nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "gathered"));
  CHECK(dds_sample_finish(s, &a, &sh, gathered.data(), nullptr) == DDS_ERR_INVALID_ARGUMENT);
  CHECK(contains(dds_last_error(), "header"));
  {
    REQUIRE(dds_sample_shard_plan(s, &a, &sh, &plan) == DDS_OK);
    // Both "ranks" claim [0, 1000): not a partition.
    REQUIRE(dds_sample_partial(s, &a, &sh, nullptr, rec.data(), nullptr) == DDS_OK);
    unsigned char* g = reinterpret_cast<unsigned char*>(gathered.data());
    std::memcpy(g, rec.data(), plan.record_bytes[0]);
    std::memcpy(g + plan.record_bytes[0], rec.data(), plan.record_bytes[0]);
    CHECK(dds_sample_finish(s, &a, &sh, g, nullptr) == DDS_ERR_INVALID_ARGUMENT);
    CHECK(contains(dds_last_error(), "partition"));
    dds_sample_args b = a;
    b.tokens = nullptr;
    CHECK(dds_sample_finish(s, &b, &sh, g, nullptr) == DDS_ERR_NULL_POINTER);
    CHECK(contains(dds_last_error(), "no output"));
  }
  // num_rows = 0 is a no-op.
  {
    dds_sample_args b = a;
    b.num_rows = 0;
    CHECK(dds_sample_partial(s, &b, &sh, nullptr, nullptr, nullptr) == DDS_OK);
    CHECK(dds_sample_finish(s, &b, &sh, nullptr, nullptr) == DDS_OK);
  }
}
