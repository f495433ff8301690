// dds_gen_vectors <dir>: writes <dir>/sample_vectors.txt and <dir>/stash_vectors.txt, the shared
// test vectors of tests/vectors/README.md: small inputs and the C library's outputs (CPU
// backend). The inputs are built from a fixed-seed integer generator (no <random> distributions,
// whose output differs between standard libraries), so regenerating gives the same inputs.
#include <dds/dds.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dtype.h"

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// splitmix64: portable, fixed.
struct Gen {
  uint64_t s;
  explicit Gen(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // A logit in [-range, range] on a 1/64 grid (exact in every dtype for small ranges).
  float logit(float range = 4.f) {
    const int64_t steps = (int64_t)(range * 64);
    return (float)((int64_t)(next() % (uint64_t)(2 * steps + 1)) - steps) / 64.f;
  }
};

std::string fmt(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", (double)x);
  return b;
}

const char* dtype_name(int32_t dt) {
  return dt == DDS_DTYPE_F32 ? "f32" : dt == DDS_DTYPE_BF16 ? "bf16" : "f16";
}

// Rounds to the dtype (the files hold floats already rounded) and returns the raw buffer.
std::vector<uint16_t> to16(std::vector<float>* v, int32_t dt) {
  std::vector<uint16_t> h(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    h[i] = dt == DDS_DTYPE_BF16 ? dds::f32_to_bf16((*v)[i]) : dds::f32_to_f16((*v)[i]);
    (*v)[i] = dt == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h[i]) : dds::f16_to_f32(h[i]);
  }
  return h;
}

struct Out {
  FILE* f;
  void line(const char* key, const std::vector<float>& v) {
    std::fprintf(f, "%s", key);
    for (float x : v) std::fprintf(f, " %s", fmt(x).c_str());
    std::fprintf(f, "\n");
  }
  void line(const char* key, const std::vector<int32_t>& v) {
    std::fprintf(f, "%s", key);
    for (int32_t x : v) std::fprintf(f, " %d", x);
    std::fprintf(f, "\n");
  }
  void line(const char* key, const std::vector<uint64_t>& v) {
    std::fprintf(f, "%s", key);
    for (uint64_t x : v) std::fprintf(f, " %" PRIu64, x);
    std::fprintf(f, "\n");
  }
  void line(const char* key, const std::vector<uint32_t>& v) {
    std::fprintf(f, "%s", key);
    for (uint32_t x : v) std::fprintf(f, " %u", x);
    std::fprintf(f, "\n");
  }
  void scalar(const char* key, long long v) { std::fprintf(f, "%s %lld\n", key, v); }
  void word(const char* key, const char* w) { std::fprintf(f, "%s %s\n", key, w); }
};

dds_sampler* make(int32_t V, int32_t rows, int32_t reqs, int32_t width) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.vocab_size = V;
  c.max_rows = rows > 0 ? rows : 1;
  c.max_requests = reqs > 0 ? reqs : 1;
  c.max_stash_width = width > 0 ? width : 1;
  dds_sampler* s = nullptr;
  if (dds_create(&c, &s) != DDS_OK) {
    std::fprintf(stderr, "dds_create: %s\n", dds_last_error());
    std::exit(1);
  }
  return s;
}

struct SampleCase {
  std::string name, comment;
  int32_t V = 0, N = 0, R = 0, dtype = DDS_DTYPE_F32;
  std::vector<int32_t> row_offsets, positions;
  std::vector<float> temperatures, guidance_scales, top_ps, min_ps;
  int32_t uncond_num_rows = -1;
  std::vector<int32_t> uncond_row_offsets, top_ks;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
  int32_t banned_token = -1;
  int32_t stats = DDS_STATS_PROCESSED;
  std::vector<float> logits, uncond_logits;
};

void emit_sample(Out& o, SampleCase c) {
  std::vector<uint16_t> h, hu;
  if (c.dtype != DDS_DTYPE_F32) {
    h = to16(&c.logits, c.dtype);
    if (!c.uncond_logits.empty()) hu = to16(&c.uncond_logits, c.dtype);
  }
  dds_sampler* s = make(c.V, c.N, c.R, 1);
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = c.N;
  a.num_requests = c.R;
  a.row_offsets = c.row_offsets.data();
  a.positions = c.positions.empty() ? nullptr : c.positions.data();
  a.logits = c.dtype == DDS_DTYPE_F32 ? (const void*)c.logits.data() : (const void*)h.data();
  a.dtype = c.dtype;
  if (c.uncond_num_rows >= 0) {
    a.uncond_logits = c.dtype == DDS_DTYPE_F32 ? (const void*)c.uncond_logits.data()
                                               : (const void*)hu.data();
    a.uncond_num_rows = c.uncond_num_rows;
    a.uncond_row_offsets = c.uncond_row_offsets.data();
  }
  auto opt = [](auto& v) { return v.empty() ? nullptr : v.data(); };
  a.temperatures = opt(c.temperatures);
  a.guidance_scales = opt(c.guidance_scales);
  a.top_ks = opt(c.top_ks);
  a.top_ps = opt(c.top_ps);
  a.min_ps = opt(c.min_ps);
  a.seeds = opt(c.seeds);
  a.steps = opt(c.steps);
  a.banned_token = c.banned_token;
  a.stats = c.stats;
  std::vector<int32_t> tok(c.N), amax(c.N), st(c.R);
  std::vector<float> lp(c.N), conf(c.N), mg(c.N), ent(c.N);
  a.tokens = tok.data();
  a.argmax = amax.data();
  a.logprobs = lp.data();
  a.confidence = conf.data();
  a.margin = mg.data();
  a.entropy = ent.data();
  a.request_status = st.data();
  if (dds_sample(s, &a, nullptr) != DDS_OK) {
    std::fprintf(stderr, "%s: dds_sample: %s\n", c.name.c_str(), dds_last_error());
    std::exit(1);
  }
  dds_destroy(s);
  if (!c.comment.empty()) std::fprintf(o.f, "# %s\n", c.comment.c_str());
  std::fprintf(o.f, "case %s\n", c.name.c_str());
  o.scalar("vocab", c.V);
  o.scalar("num_rows", c.N);
  o.scalar("num_requests", c.R);
  o.word("dtype", dtype_name(c.dtype));
  o.line("row_offsets", c.row_offsets);
  if (!c.positions.empty()) o.line("positions", c.positions);
  if (!c.temperatures.empty()) o.line("temperatures", c.temperatures);
  if (!c.guidance_scales.empty()) o.line("guidance_scales", c.guidance_scales);
  if (c.uncond_num_rows >= 0) {
    o.scalar("uncond_num_rows", c.uncond_num_rows);
    o.line("uncond_row_offsets", c.uncond_row_offsets);
  }
  if (!c.top_ks.empty()) o.line("top_ks", c.top_ks);
  if (!c.top_ps.empty()) o.line("top_ps", c.top_ps);
  if (!c.min_ps.empty()) o.line("min_ps", c.min_ps);
  if (!c.seeds.empty()) o.line("seeds", c.seeds);
  if (!c.steps.empty()) o.line("steps", c.steps);
  if (c.banned_token != -1) o.scalar("banned_token", c.banned_token);
  o.word("stats", c.stats == DDS_STATS_GUIDED ? "guided" : "processed");
  o.line("logits", c.logits);
  if (c.uncond_num_rows >= 0) o.line("uncond_logits", c.uncond_logits);
  o.line("expect_tokens", tok);
  o.line("expect_argmax", amax);
  o.line("expect_logprobs", lp);
  o.line("expect_confidence", conf);
  o.line("expect_margin", mg);
  o.line("expect_entropy", ent);
  o.line("expect_request_status", st);
  std::fprintf(o.f, "end\n\n");
}

struct StashCase {
  std::string name, comment;
  int32_t V = 0, N = 0, R = 0, dtype = DDS_DTYPE_F32;
  std::vector<int32_t> row_offsets;
  std::vector<float> logits, temperatures;
  std::vector<int32_t> keep, slots, num_valid, committed_tokens, token_ids, num_token_ids;
  int32_t num_top = 0, logits_mode = 0, num_slots = 1, rows_per_slot = 1;
};

constexpr int32_t kPoisonId = -7, kPoisonRank = -9;
constexpr float kPoisonValue = 12345.f;

void emit_stash(Out& o, StashCase c) {
  std::vector<uint16_t> h;
  if (c.dtype != DDS_DTYPE_F32) h = to16(&c.logits, c.dtype);
  dds_sampler* s = make(c.V, c.N, c.R, c.num_top);
  dds_stash_args a;
  dds_stash_args_init(&a, sizeof a);
  a.num_rows = c.N;
  a.num_requests = c.R;
  a.row_offsets = c.row_offsets.data();
  a.logits = c.dtype == DDS_DTYPE_F32 ? (const void*)c.logits.data() : (const void*)h.data();
  a.dtype = c.dtype;
  std::vector<uint8_t> keep(c.keep.begin(), c.keep.end());
  auto opt = [](auto& v) { return v.empty() ? nullptr : v.data(); };
  a.keep = opt(keep);
  a.slots = opt(c.slots);
  a.num_valid = opt(c.num_valid);
  a.temperatures = opt(c.temperatures);
  a.committed_tokens = opt(c.committed_tokens);
  a.token_ids = opt(c.token_ids);
  a.num_token_ids = opt(c.num_token_ids);
  a.num_top = c.num_top;
  a.logits_mode = c.logits_mode;
  a.num_slots = c.num_slots;
  a.rows_per_slot = c.rows_per_slot;
  const size_t size = (size_t)c.num_slots * c.rows_per_slot * (c.num_top + 1);
  std::vector<int32_t> ids(size, kPoisonId), ranks(size, kPoisonRank);
  std::vector<float> vals(size, kPoisonValue);
  a.out_token_ids = ids.data();
  a.out_logprobs = vals.data();
  a.out_ranks = ranks.data();
  if (dds_stash_logprobs(s, &a, nullptr) != DDS_OK) {
    std::fprintf(stderr, "%s: dds_stash_logprobs: %s\n", c.name.c_str(), dds_last_error());
    std::exit(1);
  }
  dds_destroy(s);
  if (!c.comment.empty()) std::fprintf(o.f, "# %s\n", c.comment.c_str());
  std::fprintf(o.f, "case %s\n", c.name.c_str());
  o.scalar("vocab", c.V);
  o.scalar("num_rows", c.N);
  o.scalar("num_requests", c.R);
  o.word("dtype", dtype_name(c.dtype));
  o.line("row_offsets", c.row_offsets);
  o.line("logits", c.logits);
  if (!c.keep.empty()) o.line("keep", c.keep);
  if (!c.slots.empty()) o.line("slots", c.slots);
  if (!c.num_valid.empty()) o.line("num_valid", c.num_valid);
  if (!c.temperatures.empty()) o.line("temperatures", c.temperatures);
  if (!c.committed_tokens.empty()) o.line("committed_tokens", c.committed_tokens);
  if (!c.token_ids.empty()) o.line("token_ids", c.token_ids);
  if (!c.num_token_ids.empty()) o.line("num_token_ids", c.num_token_ids);
  o.scalar("num_top", c.num_top);
  o.scalar("logits_mode", c.logits_mode);
  o.scalar("num_slots", c.num_slots);
  o.scalar("rows_per_slot", c.rows_per_slot);
  o.scalar("poison_id", kPoisonId);
  o.scalar("poison_value", (long long)kPoisonValue);
  o.scalar("poison_rank", kPoisonRank);
  o.line("expect_token_ids", ids);
  o.line("expect_logprobs", vals);
  o.line("expect_ranks", ranks);
  std::fprintf(o.f, "end\n\n");
}

std::vector<float> rows(Gen& g, int32_t n, float range = 4.f) {
  std::vector<float> v(n);
  for (auto& x : v) x = g.logit(range);
  return v;
}

std::vector<int32_t> iota_offsets(int32_t R) {
  std::vector<int32_t> o(R + 1);
  for (int32_t r = 0; r <= R; ++r) o[r] = r;
  return o;
}

void sample_cases(Out& o) {
  Gen g(0x5a3b1e);
  {
    SampleCase c;
    c.name = "plain_f32_two_requests";
    c.comment = "defaults (T 1, no filters), per-request seeds (one above 2^63) and steps";
    c.V = 8, c.N = 5, c.R = 2;
    c.row_offsets = {0, 3, 5};
    c.seeds = {7, 9223372036854775813ull};
    c.steps = {0, 4};
    c.logits = rows(g, c.N * c.V);
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "filters_per_request";
    c.comment = "temperature, top-k, top-p, min-p per request; positions given";
    c.V = 16, c.N = 8, c.R = 4;
    c.row_offsets = {0, 2, 4, 6, 8};
    c.positions = {3, 9, 0, 1, 100, 7, 2, 5};
    c.temperatures = {0.7f, 1.f, 1.5f, 1.f};
    c.top_ks = {0, 5, 0, 3};
    c.top_ps = {1.f, 0.9f, 0.8f, 1.f};
    c.min_ps = {0.f, 0.f, 0.05f, 0.1f};
    c.seeds = {11, 12, 13, 14};
    c.steps = {1, 2, 3, 4};
    c.logits = rows(g, c.N * c.V);
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "greedy_guided_stats_banned";
    c.comment = "T = 0 (greedy) for two requests, guided statistics, banned token 4";
    c.V = 10, c.N = 3, c.R = 3;
    c.row_offsets = iota_offsets(3);
    c.temperatures = {0.f, 0.f, 0.5f};
    c.banned_token = 4;
    c.stats = DDS_STATS_GUIDED;
    c.logits = rows(g, c.N * c.V);
    c.logits[4] = 9.f;  // the banned column would be the argmax
    c.logits[10 + 2] = c.logits[10 + 7] = 8.f;  // a tie at the top: lower id wins
    emit_sample(o, c);
  }
  for (int32_t stats : {DDS_STATS_PROCESSED, DDS_STATS_GUIDED}) {
    SampleCase c;
    c.name = stats == DDS_STATS_GUIDED ? "guidance_mixed_batch_guided_stats"
                                       : "guidance_mixed_batch";
    c.comment = "request 1 unguided (-1), requests 0 and 2 guided; -inf in c and in u";
    c.V = 12, c.N = 6, c.R = 3;
    c.row_offsets = {0, 2, 3, 6};
    c.uncond_num_rows = 5;
    c.uncond_row_offsets = {0, -1, 2};
    c.guidance_scales = {1.5f, 3.f, 0.75f};
    c.temperatures = {1.f, 0.8f, 1.2f};
    c.top_ks = {0, 0, 6};
    c.seeds = {21, 22, 23};
    c.stats = stats;
    c.logits = rows(g, c.N * c.V);
    c.uncond_logits = rows(g, c.uncond_num_rows * c.V);
    c.logits[3] = -kInf;
    c.uncond_logits[c.V + 5] = -kInf;
    c.uncond_logits[2 * c.V + 1] = -kInf;
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "bf16_logits";
    c.V = 20, c.N = 4, c.R = 2, c.dtype = DDS_DTYPE_BF16;
    c.row_offsets = {0, 1, 4};
    c.top_ps = {0.9f, 1.f};
    c.seeds = {31, 32};
    c.logits = rows(g, c.N * c.V, 6.f);
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "f16_logits";
    c.V = 20, c.N = 4, c.R = 4, c.dtype = DDS_DTYPE_F16;
    c.row_offsets = iota_offsets(4);
    c.temperatures = {0.6f, 1.f, 2.f, 0.f};
    c.min_ps = {0.02f, 0.f, 0.f, 0.f};
    c.seeds = {41, 42, 43, 44};
    c.steps = {7, 7, 7, 7};
    c.logits = rows(g, c.N * c.V, 6.f);
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "special_values_and_flags";
    c.comment = "an empty row, NaN and +inf logits, one finite column; bad per-request values "
                "(flags in expect_request_status)";
    c.V = 6, c.N = 4, c.R = 4;
    c.row_offsets = iota_offsets(4);
    c.temperatures = {1.f, kNaN, 1.f, -1.f};
    c.top_ks = {0, 0, -2, 0};
    c.top_ps = {1.f, 1.f, kNaN, 1.f};
    c.min_ps = {0.f, 0.f, 0.f, kNaN};
    c.seeds = {51, 52, 53, 54};
    c.logits = {-kInf, -kInf, -kInf, -kInf, -kInf, -kInf,  //
                1.f,   kNaN,  kInf,  0.f,   kInf,  -2.f,   //
                -kInf, -kInf, 0.5f,  -kInf, kNaN,  -kInf,  //
                0.25f, -1.f,  2.f,   1.f,   0.f,   -0.5f};
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "vocab_1";
    c.V = 1, c.N = 3, c.R = 1;
    c.row_offsets = {0, 3};
    c.temperatures = {0.5f};
    c.logits = {1.5f, -3.f, 0.f};
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "two_blocks_v1100";
    c.comment = "V > 1024: the two-level block choice; block 1 holds most of the mass in row 1";
    c.V = 1100, c.N = 3, c.R = 1;
    c.row_offsets = {0, 3};
    c.positions = {0, 17, 4096};
    c.seeds = {0xfeedfacecafebeefull};
    c.steps = {123456};
    c.logits = rows(g, c.N * c.V, 3.f);
    for (int t = 1024; t < 1100; ++t) c.logits[c.V + t] += 4.f;
    emit_sample(o, c);
  }
  {
    SampleCase c;
    c.name = "uncond_rows_out_of_range";
    c.comment = "request 1's uncond rows 2..3 exceed uncond_num_rows 3: not guided, flag 32";
    c.V = 5, c.N = 4, c.R = 2;
    c.row_offsets = {0, 2, 4};
    c.uncond_num_rows = 3;
    c.uncond_row_offsets = {0, 2};
    c.guidance_scales = {1.f, 1.f};
    c.logits = rows(g, c.N * c.V);
    c.uncond_logits = rows(g, c.uncond_num_rows * c.V);
    emit_sample(o, c);
  }
}

void stash_cases(Out& o) {
  Gen g(0x57a54);
  {
    StashCase c;
    c.name = "top_n_default_layout";
    c.comment = "keep/slots/num_valid NULL; request 1 has one row, so rows 1-2 of slot 1 stay "
                "poisoned";
    c.V = 10, c.N = 4, c.R = 2;
    c.row_offsets = {0, 3, 4};
    c.logits = rows(g, c.N * c.V);
    c.logits[5] = c.logits[6] = 5.f;  // a tie at the top of row 0
    c.num_top = 3, c.num_slots = 2, c.rows_per_slot = 3;
    emit_stash(o, c);
  }
  {
    StashCase c;
    c.name = "keep_slots_num_valid_temperatures";
    c.V = 8, c.N = 6, c.R = 3;
    c.row_offsets = {0, 2, 3, 6};
    c.logits = rows(g, c.N * c.V);
    c.keep = {1, 0, 1};
    c.slots = {2, 0, 1};
    c.num_valid = {1, 2, 5};  // 5 clamps to 3 rows, then to rows_per_slot 2
    c.temperatures = {0.5f, 1.f, 2.f};
    c.num_top = 2, c.num_slots = 3, c.rows_per_slot = 2;
    emit_stash(o, c);
  }
  for (int32_t mode : {0, 1}) {
    StashCase c;
    c.name = mode ? "ids_committed_logits_mode" : "ids_committed_logprobs";
    c.comment = "own ids (2 of 4 for request 0, none -> top-n for request 1), committed tokens "
                "incl. out of range";
    c.V = 9, c.N = 4, c.R = 2;
    c.row_offsets = {0, 2, 4};
    c.logits = rows(g, c.N * c.V);
    c.logits[9 + 4] = -kInf;
    c.token_ids = {4, 0, 7, 7, 1, 1, 1, 1};
    c.num_token_ids = {2, 0};
    c.committed_tokens = {3, -1, 8, 20};
    c.temperatures = {1.5f, 0.f};
    c.logits_mode = mode;
    c.num_top = 4, c.num_slots = 2, c.rows_per_slot = 2;
    emit_stash(o, c);
  }
  {
    StashCase c;
    c.name = "bf16_ties_and_padding";
    c.comment = "exact ties share a rank; row 1 has 3 finite columns < num_top 5: padding";
    c.V = 12, c.N = 2, c.R = 2, c.dtype = DDS_DTYPE_BF16;
    c.row_offsets = {0, 1, 2};
    c.logits = {1.f,   2.f,   2.f,   0.5f,  2.f,   -1.f,  0.f,   1.f,   kNaN,  3.f,   -kInf, 1.f,
                -kInf, -kInf, 0.25f, -kInf, -kInf, kNaN,  -kInf, 2.5f,  -kInf, -kInf, 0.25f, -kInf};
    c.num_top = 5, c.num_slots = 2, c.rows_per_slot = 1;
    emit_stash(o, c);
  }
  {
    StashCase c;
    c.name = "bad_slot_and_num_top_0";
    c.comment = "request 1's slot 5 is outside num_slots 2: skipped (outputs stay poisoned)";
    c.V = 7, c.N = 3, c.R = 2, c.dtype = DDS_DTYPE_F16;
    c.row_offsets = {0, 2, 3};
    c.logits = rows(g, c.N * c.V);
    c.slots = {1, 5};
    c.num_top = 0, c.num_slots = 2, c.rows_per_slot = 2;
    emit_stash(o, c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <dir>   (writes <dir>/sample_vectors.txt, stash_vectors.txt)\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const char* header =
      "# dds shared test vectors (format: tests/vectors/README.md). Generated by dds_gen_vectors\n"
      "# (tests/vectors/gen_vectors.cpp) from the CPU backend; do not edit by hand.\n\n";
  for (int which = 0; which < 2; ++which) {
    const std::string path = dir + (which ? "/stash_vectors.txt" : "/sample_vectors.txt");
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::perror(path.c_str());
      return 1;
    }
    std::fputs(header, f);
    Out o{f};
    if (which)
      stash_cases(o);
    else
      sample_cases(o);
    std::fclose(f);
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}
