// Bad input: every case asserts the status, that dds_last_error() names the argument, and that
// nothing was written (outputs poisoned before the call are unchanged).
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "test_util.h"

using namespace tu;

namespace {

constexpr int32_t V = 8, ROWS = 6, REQS = 3;

// A valid dds_sample call (3 requests of 2 rows) with every output attached and poisoned.
struct SampleCall {
  std::vector<float> logits, uncond;
  std::vector<int32_t> offs = {0, 2, 4, 6}, uoffs = {0, -1, 2}, positions = {0, 1, 0, 1, 5, 9};
  std::vector<float> temps = {1.f, 0.5f, 0.f}, gs = {1.f, 0.f, 2.f}, tps = {1.f, .9f, .5f},
                     mps = {0.f, .1f, 0.f};
  std::vector<int32_t> tks = {0, 3, 1};
  std::vector<uint64_t> seeds = {1, 2, 3};
  std::vector<uint32_t> steps = {4, 5, 6};
  Outputs out{ROWS, REQS, (int64_t)ROWS * V};
  dds_sample_args a;
  SampleCall() : logits(ROWS * V), uncond(ROWS * V) {
    for (int i = 0; i < ROWS * V; ++i) {
      logits[i] = (float)((i * 37) % 11) * 0.3f;
      uncond[i] = (float)((i * 17) % 7) * 0.2f;
    }
    a = sample_args();
    a.num_rows = ROWS;
    a.num_requests = REQS;
    a.row_offsets = offs.data();
    a.positions = positions.data();
    a.logits = logits.data();
    a.uncond_logits = uncond.data();
    a.uncond_num_rows = ROWS;
    a.uncond_row_offsets = uoffs.data();
    a.guidance_scales = gs.data();
    a.temperatures = temps.data();
    a.top_ks = tks.data();
    a.top_ps = tps.data();
    a.min_ps = mps.data();
    a.seeds = seeds.data();
    a.steps = steps.data();
    out.attach(&a);
  }
};

constexpr int32_t TOP = 3, SLOTS = 4, RPS = 2, E = TOP + 1;

struct StashCall {
  std::vector<float> logits;
  std::vector<int32_t> offs = {0, 2, 4, 6}, slots = {3, 0, 1}, nvalid = {2, 1, 2};
  std::vector<uint8_t> keep = {1, 1, 0};
  std::vector<int32_t> ids, oid, orank, status;
  std::vector<float> olp;
  dds_stash_args a;
  StashCall()
      : logits(ROWS * V),
        ids(SLOTS * RPS * E, kPoisonI),
        oid(SLOTS * RPS * E, kPoisonI),
        orank(SLOTS * RPS * E, kPoisonI),
        status(REQS, kPoisonI),
        olp(SLOTS * RPS * E, kPoisonF) {
    for (int i = 0; i < ROWS * V; ++i) logits[i] = (float)((i * 29) % 13) * 0.25f;
    a = stash_args();
    a.num_rows = ROWS;
    a.num_requests = REQS;
    a.row_offsets = offs.data();
    a.logits = logits.data();
    a.keep = keep.data();
    a.slots = slots.data();
    a.num_valid = nvalid.data();
    a.num_top = TOP;
    a.num_slots = SLOTS;
    a.rows_per_slot = RPS;
    a.out_token_ids = oid.data();
    a.out_logprobs = olp.data();
    a.out_ranks = orank.data();
    a.request_status = status.data();
  }
  bool untouched() const {
    auto ci = [](const std::vector<int32_t>& v) {
      return std::all_of(v.begin(), v.end(), [](int32_t x) { return x == kPoisonI; });
    };
    return ci(oid) && ci(orank) && ci(status) &&
           std::all_of(olp.begin(), olp.end(), [](float x) { return x == kPoisonF; });
  }
};

struct Case {
  const char* name;
  dds_status status;
  const char* needle;  // must appear in dds_last_error()
};

}  // namespace

TEST_CASE("the valid baseline calls succeed and clear the error message") {
  Sampler s(V, ROWS, REQS, TOP);
  {
    SampleCall c;
    dds_sample(nullptr, &c.a, nullptr);  // leaves a message
    CHECK(std::string(dds_last_error()) != "");
    CHECK(dds_sample(s, &c.a, nullptr) == DDS_OK);
    CHECK(std::string(dds_last_error()) == "");
    CHECK(!c.out.untouched());
  }
  {
    StashCall c;
    CHECK(dds_stash_logprobs(s, &c.a, nullptr) == DDS_OK);
    CHECK(!c.untouched());
  }
}

TEST_CASE("dds_sample rejects bad arguments, names them, and writes nothing") {
  Sampler s(V, ROWS, REQS, TOP);
  struct SCase {
    Case c;
    std::function<void(SampleCall&, dds_sampler**)> mutate;
  };
  alignas(8) static unsigned char raw[64 * 1024];
  const std::vector<SCase> cases = {
      {{"NULL sampler", DDS_ERR_NULL_POINTER, "sampler"},
       [](SampleCall&, dds_sampler** p) { *p = nullptr; }},
      {{"struct_size 0", DDS_ERR_STRUCT_SIZE, "struct_size"},
       [](SampleCall& c, dds_sampler**) { c.a.struct_size = 0; }},
      {{"struct_size too small", DDS_ERR_STRUCT_SIZE, "struct_size"},
       [](SampleCall& c, dds_sampler**) { c.a.struct_size = offsetof(dds_sample_args, allowed_token_masks) - 8; }},
      {{"negative num_rows", DDS_ERR_INVALID_ARGUMENT, "num_rows"},
       [](SampleCall& c, dds_sampler**) { c.a.num_rows = -1; }},
      {{"rows over capacity", DDS_ERR_CAPACITY, "max_rows"},
       [](SampleCall& c, dds_sampler**) { c.a.num_rows = ROWS + 1; }},
      {{"zero requests", DDS_ERR_INVALID_ARGUMENT, "num_requests"},
       [](SampleCall& c, dds_sampler**) { c.a.num_requests = 0; }},
      {{"negative requests", DDS_ERR_INVALID_ARGUMENT, "num_requests"},
       [](SampleCall& c, dds_sampler**) { c.a.num_requests = -2; }},
      {{"requests over capacity", DDS_ERR_CAPACITY, "max_requests"},
       [](SampleCall& c, dds_sampler**) { c.a.num_requests = REQS + 1; }},
      {{"more requests than rows", DDS_ERR_INVALID_ARGUMENT, "num_requests"},
       [](SampleCall& c, dds_sampler**) {
         c.a.num_rows = 2;
         c.a.num_requests = 3;
       }},
      {{"row_offsets NULL but requests != rows", DDS_ERR_INVALID_ARGUMENT, "row_offsets"},
       [](SampleCall& c, dds_sampler**) { c.a.row_offsets = nullptr; }},
      // Bad row_offsets values (device-resident): flagged DDS_REQ_BAD_ROW_OFFSETS, or
      // DDS_ERR_INVALID_VALUE in debug mode (test_hostile_values.cpp).
      {{"NULL logits", DDS_ERR_NULL_POINTER, "logits"},
       [](SampleCall& c, dds_sampler**) { c.a.logits = nullptr; }},
      {{"bad dtype", DDS_ERR_INVALID_ARGUMENT, "dtype"},
       [](SampleCall& c, dds_sampler**) { c.a.dtype = 3; }},
      {{"negative dtype", DDS_ERR_INVALID_ARGUMENT, "dtype"},
       [](SampleCall& c, dds_sampler**) { c.a.dtype = -1; }},
      {{"row_stride < vocab", DDS_ERR_INVALID_ARGUMENT, "row_stride"},
       [](SampleCall& c, dds_sampler**) { c.a.row_stride = V - 1; }},
      {{"negative row_stride", DDS_ERR_INVALID_ARGUMENT, "row_stride"},
       [](SampleCall& c, dds_sampler**) { c.a.row_stride = -V; }},
      {{"row_stride * rows overflowing index arithmetic", DDS_ERR_INVALID_ARGUMENT, "row_stride"},
       [](SampleCall& c, dds_sampler**) { c.a.row_stride = INT64_MAX / 2; }},
      {{"probs_row_stride * rows overflowing", DDS_ERR_INVALID_ARGUMENT, "probs_row_stride"},
       [](SampleCall& c, dds_sampler**) { c.a.probs_row_stride = (int64_t(1) << 62) / 3; }},
      {{"uncond_row_stride < vocab", DDS_ERR_INVALID_ARGUMENT, "uncond_row_stride"},
       [](SampleCall& c, dds_sampler**) { c.a.uncond_row_stride = 3; }},
      {{"negative uncond_num_rows", DDS_ERR_INVALID_ARGUMENT, "uncond_num_rows"},
       [](SampleCall& c, dds_sampler**) { c.a.uncond_num_rows = -1; }},
      {{"uncond_num_rows too small for mirrored rows", DDS_ERR_INVALID_ARGUMENT,
        "uncond_num_rows"},
       [](SampleCall& c, dds_sampler**) {
         c.a.uncond_row_offsets = nullptr;
         c.a.uncond_num_rows = ROWS - 1;
       }},
      {{"uncond offsets without uncond logits", DDS_ERR_INVALID_ARGUMENT, "uncond_row_offsets"},
       [](SampleCall& c, dds_sampler**) { c.a.uncond_logits = nullptr; }},
      {{"NaN guidance_scale", DDS_ERR_INVALID_ARGUMENT, "guidance_scale"},
       [](SampleCall& c, dds_sampler**) { c.a.guidance_scale = kNaN; }},
      {{"infinite guidance_scale", DDS_ERR_INVALID_ARGUMENT, "guidance_scale"},
       [](SampleCall& c, dds_sampler**) { c.a.guidance_scale = -kInf; }},
      {{"NaN temperature", DDS_ERR_INVALID_ARGUMENT, "temperature"},
       [](SampleCall& c, dds_sampler**) { c.a.temperature = kNaN; }},
      {{"negative temperature", DDS_ERR_INVALID_ARGUMENT, "temperature"},
       [](SampleCall& c, dds_sampler**) { c.a.temperature = -0.5f; }},
      {{"infinite temperature", DDS_ERR_INVALID_ARGUMENT, "temperature"},
       [](SampleCall& c, dds_sampler**) { c.a.temperature = kInf; }},
      {{"negative top_k", DDS_ERR_INVALID_ARGUMENT, "top_k"},
       [](SampleCall& c, dds_sampler**) { c.a.top_k = -1; }},
      {{"NaN top_p", DDS_ERR_INVALID_ARGUMENT, "top_p"},
       [](SampleCall& c, dds_sampler**) { c.a.top_p = kNaN; }},
      {{"NaN min_p", DDS_ERR_INVALID_ARGUMENT, "min_p"},
       [](SampleCall& c, dds_sampler**) { c.a.min_p = kNaN; }},
      {{"negative min_p", DDS_ERR_INVALID_ARGUMENT, "min_p"},
       [](SampleCall& c, dds_sampler**) { c.a.min_p = -0.1f; }},
      {{"banned token = vocab", DDS_ERR_INVALID_ARGUMENT, "banned_token"},
       [](SampleCall& c, dds_sampler**) { c.a.banned_token = V; }},
      {{"banned token < -1", DDS_ERR_INVALID_ARGUMENT, "banned_token"},
       [](SampleCall& c, dds_sampler**) { c.a.banned_token = -2; }},
      {{"bad stats enum", DDS_ERR_INVALID_ARGUMENT, "stats"},
       [](SampleCall& c, dds_sampler**) { c.a.stats = 2; }},
      {{"bad probs dtype", DDS_ERR_INVALID_ARGUMENT, "probs_dtype"},
       [](SampleCall& c, dds_sampler**) { c.a.probs_dtype = 5; }},
      {{"probs_row_stride < vocab", DDS_ERR_INVALID_ARGUMENT, "probs_row_stride"},
       [](SampleCall& c, dds_sampler**) { c.a.probs_row_stride = 1; }},
      {{"no outputs", DDS_ERR_NULL_POINTER, "no output"},
       [](SampleCall& c, dds_sampler**) {
         c.a.tokens = nullptr, c.a.logprobs = nullptr, c.a.argmax = nullptr;
         c.a.confidence = nullptr, c.a.margin = nullptr, c.a.entropy = nullptr;
         c.a.probs = nullptr;
       }},
      {{"misaligned f32 logits", DDS_ERR_INVALID_ARGUMENT, "logits"},
       [](SampleCall& c, dds_sampler**) { c.a.logits = raw + 2; }},
      {{"misaligned seeds", DDS_ERR_INVALID_ARGUMENT, "seeds"},
       [](SampleCall& c, dds_sampler**) { c.a.seeds = reinterpret_cast<const uint64_t*>(raw + 4); }},
      {{"misaligned tokens", DDS_ERR_INVALID_ARGUMENT, "tokens"},
       [](SampleCall& c, dds_sampler**) { c.a.tokens = reinterpret_cast<int32_t*>(raw + 1); }},
      {{"misaligned bf16 probs", DDS_ERR_INVALID_ARGUMENT, "probs"},
       [](SampleCall& c, dds_sampler**) {
         c.a.probs_dtype = DDS_DTYPE_BF16;
         c.a.probs = raw + 1;
       }},
  };
  CHECK(cases.size() >= 30);
  for (const SCase& sc : cases) {
    CAPTURE(sc.c.name);
    SampleCall c;
    dds_sampler* p = s;
    sc.mutate(c, &p);
    const dds_status st = dds_sample(p, &c.a, nullptr);
    const std::string msg = dds_last_error();
    CAPTURE(msg);
    CHECK(st == sc.c.status);
    CHECK(contains(msg.c_str(), sc.c.needle));
    CHECK(contains(msg.c_str(), "dds_sample"));
    CHECK(c.out.untouched());
  }
  // NULL args.
  CHECK(dds_sample(s, nullptr, nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "args"));
  // num_rows = 0 is a no-op (OK, nothing written) even with otherwise unchecked fields.
  SampleCall c;
  c.a.num_rows = 0;
  c.a.num_requests = 0;
  c.a.logits = nullptr;
  CHECK(dds_sample(s, &c.a, nullptr) == DDS_OK);
  CHECK(c.out.untouched());
}

TEST_CASE("dds_stash_logprobs rejects bad arguments, names them, and writes nothing") {
  Sampler s(V, ROWS, REQS, TOP);
  struct TCase {
    Case c;
    std::function<void(StashCall&, dds_sampler**)> mutate;
  };
  const std::vector<TCase> cases = {
      {{"NULL sampler", DDS_ERR_NULL_POINTER, "sampler"},
       [](StashCall&, dds_sampler** p) { *p = nullptr; }},
      {{"struct_size too small", DDS_ERR_STRUCT_SIZE, "struct_size"},
       [](StashCall& c, dds_sampler**) { c.a.struct_size = 4; }},
      {{"negative num_rows", DDS_ERR_INVALID_ARGUMENT, "num_rows"},
       [](StashCall& c, dds_sampler**) { c.a.num_rows = -5; }},
      {{"rows over capacity", DDS_ERR_CAPACITY, "max_rows"},
       [](StashCall& c, dds_sampler**) { c.a.num_rows = ROWS + 1; }},
      {{"negative num_top", DDS_ERR_INVALID_ARGUMENT, "num_top"},
       [](StashCall& c, dds_sampler**) { c.a.num_top = -1; }},
      {{"top-n over capacity", DDS_ERR_CAPACITY, "max_stash_width"},
       [](StashCall& c, dds_sampler**) { c.a.num_top = TOP + 1; }},
      {{"zero requests", DDS_ERR_INVALID_ARGUMENT, "num_requests"},
       [](StashCall& c, dds_sampler**) { c.a.num_requests = 0; }},
      {{"requests over capacity", DDS_ERR_CAPACITY, "max_requests"},
       [](StashCall& c, dds_sampler**) { c.a.num_requests = REQS + 1; }},
      {{"row_offsets NULL but requests != rows", DDS_ERR_INVALID_ARGUMENT, "row_offsets"},
       [](StashCall& c, dds_sampler**) { c.a.row_offsets = nullptr; }},
      // Bad row_offsets values: flagged, or DDS_ERR_INVALID_VALUE in debug mode
      // (test_hostile_values.cpp).
      {{"NULL logits", DDS_ERR_NULL_POINTER, "logits"},
       [](StashCall& c, dds_sampler**) { c.a.logits = nullptr; }},
      {{"bad dtype", DDS_ERR_INVALID_ARGUMENT, "dtype"},
       [](StashCall& c, dds_sampler**) { c.a.dtype = 9; }},
      {{"row_stride < vocab", DDS_ERR_INVALID_ARGUMENT, "row_stride"},
       [](StashCall& c, dds_sampler**) { c.a.row_stride = 2; }},
      {{"NaN temperature", DDS_ERR_INVALID_ARGUMENT, "temperature"},
       [](StashCall& c, dds_sampler**) { c.a.temperature = kNaN; }},
      {{"logits_mode 2", DDS_ERR_INVALID_ARGUMENT, "logits_mode"},
       [](StashCall& c, dds_sampler**) { c.a.logits_mode = 2; }},
      {{"num_slots 0", DDS_ERR_INVALID_ARGUMENT, "num_slots"},
       [](StashCall& c, dds_sampler**) { c.a.num_slots = 0; }},
      {{"rows_per_slot 0", DDS_ERR_INVALID_ARGUMENT, "rows_per_slot"},
       [](StashCall& c, dds_sampler**) { c.a.rows_per_slot = 0; }},
      {{"output size overflows int32", DDS_ERR_INVALID_ARGUMENT, "num_slots"},
       [](StashCall& c, dds_sampler**) {
         c.a.num_slots = 1 << 20;
         c.a.rows_per_slot = 1 << 10;
       }},
      {{"num_token_ids without token_ids", DDS_ERR_INVALID_ARGUMENT, "num_token_ids"},
       [](StashCall& c, dds_sampler**) { c.a.num_token_ids = c.nvalid.data(); }},
      {{"no outputs", DDS_ERR_NULL_POINTER, "no output"},
       [](StashCall& c, dds_sampler**) {
         c.a.out_token_ids = nullptr, c.a.out_logprobs = nullptr, c.a.out_ranks = nullptr;
       }},
      {{"misaligned slots", DDS_ERR_INVALID_ARGUMENT, "slots"},
       [](StashCall& c, dds_sampler**) {
         c.a.slots = reinterpret_cast<const int32_t*>(
             reinterpret_cast<const unsigned char*>(c.slots.data()) + 1);
       }},
  };
  for (const TCase& tc : cases) {
    CAPTURE(tc.c.name);
    StashCall c;
    dds_sampler* p = s;
    tc.mutate(c, &p);
    const dds_status st = dds_stash_logprobs(p, &c.a, nullptr);
    const std::string msg = dds_last_error();
    CAPTURE(msg);
    CHECK(st == tc.c.status);
    CHECK(contains(msg.c_str(), tc.c.needle));
    CHECK(contains(msg.c_str(), "dds_stash_logprobs"));
    CHECK(c.untouched());
  }
  CHECK(dds_stash_logprobs(s, nullptr, nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "args"));
}

TEST_CASE("dds_create rejects bad configs, names the field, and sets *out to NULL") {
  struct CCase {
    Case c;
    std::function<void(dds_sampler_config&)> mutate;
  };
  const std::vector<CCase> cases = {
      {{"struct_size too small", DDS_ERR_STRUCT_SIZE, "struct_size"},
       [](dds_sampler_config& c) { c.struct_size = 8; }},
      {{"unknown backend", DDS_ERR_INVALID_ARGUMENT, "backend"},
       [](dds_sampler_config& c) { c.backend = 7; }},
      {{"vocab 0", DDS_ERR_INVALID_ARGUMENT, "vocab_size"},
       [](dds_sampler_config& c) { c.vocab_size = 0; }},
      {{"negative vocab", DDS_ERR_INVALID_ARGUMENT, "vocab_size"},
       [](dds_sampler_config& c) { c.vocab_size = -3; }},
      {{"max_rows 0", DDS_ERR_INVALID_ARGUMENT, "max_rows"},
       [](dds_sampler_config& c) { c.max_rows = 0; }},
      {{"max_requests 0", DDS_ERR_INVALID_ARGUMENT, "max_requests"},
       [](dds_sampler_config& c) { c.max_requests = 0; }},
      {{"max_stash_width -1", DDS_ERR_INVALID_ARGUMENT, "max_stash_width"},
       [](dds_sampler_config& c) { c.max_stash_width = -1; }},
      {{"max_stash_width 1025", DDS_ERR_INVALID_ARGUMENT, "max_stash_width"},
       [](dds_sampler_config& c) { c.max_stash_width = 1025; }},
      {{"unknown flag bits", DDS_ERR_INVALID_ARGUMENT, "flags"},
       [](dds_sampler_config& c) { c.flags = 0x80; }},
      {{"negative CUDA device", DDS_ERR_INVALID_ARGUMENT, "device"},
       [](dds_sampler_config& c) {
         c.backend = DDS_BACKEND_CUDA;
         c.device = -1;
       }},
  };
  for (const CCase& cc : cases) {
    CAPTURE(cc.c.name);
    dds_sampler_config cfg;
    REQUIRE(dds_sampler_config_init(&cfg, sizeof cfg) == DDS_OK);
    cfg.vocab_size = 16;
    cc.mutate(cfg);
    dds_sampler* out = reinterpret_cast<dds_sampler*>(&cfg);  // poison
    const dds_status st = dds_create(&cfg, &out);
    const std::string msg = dds_last_error();
    CAPTURE(msg);
    CHECK(st == cc.c.status);
    CHECK(contains(msg.c_str(), cc.c.needle));
    CHECK(out == nullptr);
  }
  dds_sampler_config cfg;
  REQUIRE(dds_sampler_config_init(&cfg, sizeof cfg) == DDS_OK);
  cfg.vocab_size = 4;
  dds_sampler* out = nullptr;
  CHECK(dds_create(nullptr, &out) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "config"));
  CHECK(dds_create(&cfg, nullptr) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "out"));
  // The CUDA backend where there is none: NO_DEVICE (or UNSUPPORTED), never a crash.
  if (!dds_has_cuda()) {
    cfg.backend = DDS_BACKEND_CUDA;
    out = reinterpret_cast<dds_sampler*>(&cfg);
    const dds_status st = dds_create(&cfg, &out);
    CHECK((st == DDS_ERR_NO_DEVICE || st == DDS_ERR_UNSUPPORTED));
    CHECK(contains(dds_last_error(), "CUDA"));
    CHECK(out == nullptr);
  }
  CHECK(dds_destroy(nullptr) == DDS_OK);
}

TEST_CASE("init functions, status strings, backend query, larger struct sizes") {
  dds_sampler_config cfg;
  CHECK(dds_sampler_config_init(nullptr, sizeof cfg) == DDS_ERR_NULL_POINTER);
  CHECK(contains(dds_last_error(), "config"));
  CHECK(dds_sampler_config_init(&cfg, 4) == DDS_ERR_STRUCT_SIZE);
  CHECK(contains(dds_last_error(), "struct_size"));
  dds_sample_args sa;
  CHECK(dds_sample_args_init(nullptr, sizeof sa) == DDS_ERR_NULL_POINTER);
  CHECK(dds_sample_args_init(&sa, offsetof(dds_sample_args, allowed_token_masks) - 4) ==
        DDS_ERR_STRUCT_SIZE);
  CHECK(contains(dds_last_error(), "struct_size"));
  dds_stash_args ta;
  CHECK(dds_stash_args_init(nullptr, sizeof ta) == DDS_ERR_NULL_POINTER);
  CHECK(dds_stash_args_init(&ta, 0) == DDS_ERR_STRUCT_SIZE);

  // Defaults documented in the header.
  REQUIRE(dds_sampler_config_init(&cfg, sizeof cfg) == DDS_OK);
  CHECK(cfg.struct_size == sizeof cfg);
  CHECK(cfg.backend == DDS_BACKEND_CPU);
  CHECK(cfg.vocab_size == 0);
  CHECK(cfg.max_rows == 4096);
  CHECK(cfg.max_requests == 1024);
  CHECK(cfg.max_stash_width == 20);
  CHECK(cfg.flags == 0u);
  sa = sample_args();
  CHECK(sa.struct_size == sizeof sa);
  CHECK(sa.num_requests == 1);
  CHECK(sa.temperature == 1.f);
  CHECK(sa.top_p == 1.f);
  CHECK(sa.top_k == 0);
  CHECK(sa.min_p == 0.f);
  CHECK(sa.guidance_scale == 0.f);
  CHECK(sa.banned_token == -1);
  CHECK(sa.stats == DDS_STATS_PROCESSED);
  CHECK(sa.row_stride == 0);
  CHECK(sa.tokens == nullptr);
  CHECK(sa.request_status == nullptr);
  ta = stash_args();
  CHECK(ta.num_top == 20);
  CHECK(ta.temperature == 1.f);
  CHECK(ta.logits_mode == 0);
  CHECK(ta.keep == nullptr);

  CHECK(std::string(dds_status_string(DDS_OK)) == "DDS_OK");
  CHECK(std::string(dds_status_string(DDS_ERR_INVALID_VALUE)) == "DDS_ERR_INVALID_VALUE");
  CHECK(std::string(dds_status_string(DDS_ERR_INTERNAL)) == "DDS_ERR_INTERNAL");
  CHECK(std::string(dds_status_string((dds_status)99)) == "DDS_UNKNOWN_STATUS");
  CHECK(dds_version_number() == DDS_VERSION_NUMBER);
  CHECK(std::string(dds_version_string()) ==
        std::to_string(DDS_VERSION_MAJOR) + "." + std::to_string(DDS_VERSION_MINOR) + "." +
            std::to_string(DDS_VERSION_PATCH));

  Sampler s(4);
  int32_t be = -1;
  CHECK(dds_sampler_backend(s, &be) == DDS_OK);
  CHECK(be == DDS_BACKEND_CPU);
  CHECK(dds_sampler_backend(nullptr, &be) == DDS_ERR_NULL_POINTER);
  CHECK(dds_sampler_backend(s, nullptr) == DDS_ERR_NULL_POINTER);

  // A caller compiled against a newer header passes a larger struct: init zero-fills the tail,
  // the call accepts it.
  struct Bigger {
    dds_sample_args a;
    unsigned char extra[32];
  } big;
  std::memset(&big, 0xcd, sizeof big);
  REQUIRE(dds_sample_args_init(&big.a, sizeof big) == DDS_OK);
  CHECK(big.a.struct_size == sizeof big);
  for (unsigned char x : big.extra) CHECK(x == 0);
  const float lg[4] = {0, 1, 2, 3};
  int32_t tok = -1;
  big.a.num_rows = 1;
  big.a.logits = lg;
  big.a.temperature = 0.f;
  big.a.tokens = &tok;
  CHECK(dds_sample(s, &big.a, nullptr) == DDS_OK);
  CHECK(tok == 3);
}

TEST_CASE("one sampler used by two threads at once: DDS_ERR_BUSY; errors are thread-local") {
  const int32_t BV = 262144, BN = 48;
  Sampler big(BV, BN, 1);
  std::vector<float> lg((size_t)BV * BN, 0.f);
  std::vector<int32_t> tok(BN);
  std::atomic<bool> started{false}, done{false};
  dds_status bg = DDS_ERR_INTERNAL;
  std::thread t([&] {
    dds_sample_args a = sample_args();
    const int32_t offs[2] = {0, BN};
    a.num_rows = BN;
    a.num_requests = 1;
    a.row_offsets = offs;
    a.logits = lg.data();
    a.tokens = tok.data();
    started = true;
    // ~0.2-1 s on the CPU backend; retried if the other thread's call holds the sampler.
    while ((bg = dds_sample(big, &a, nullptr)) == DDS_ERR_BUSY) {
    }
    done = true;
  });
  while (!started) std::this_thread::yield();
  int32_t x = kPoisonI;
  dds_sample_args b = sample_args();
  b.num_rows = 1;
  b.logits = lg.data();
  b.temperature = 0.f;
  bool got_busy = false;
  std::string msg;
  while (!done && !got_busy) {
    int32_t y = kPoisonI;
    b.tokens = &y;
    const dds_status st = dds_sample(big, &b, nullptr);
    if (st == DDS_ERR_BUSY) {
      got_busy = true;
      msg = dds_last_error();
      CHECK(y == kPoisonI);  // nothing written
    } else {
      CHECK(st == DDS_OK);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  t.join();
  CHECK(bg == DDS_OK);
  CHECK(got_busy);
  CHECK(contains(msg.c_str(), "in use"));
  b.tokens = &x;
  // Afterwards the sampler is free again.
  CHECK(dds_sample(big, &b, nullptr) == DDS_OK);
  CHECK(x == 0);
  // The message of a failure in another thread does not leak into this one.
  CHECK(dds_sample(nullptr, &b, nullptr) == DDS_ERR_NULL_POINTER);
  std::string other;
  std::thread([&] {
    other = dds_last_error();
    dds_sample(big, nullptr, nullptr);
  }).join();
  CHECK(other == "");
  CHECK(contains(dds_last_error(), "sampler"));
}
