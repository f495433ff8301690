// The shared test vectors (tests/vectors/*.txt, format in tests/vectors/README.md): the library
// must still reproduce them (tokens, ids, ranks, statuses exactly; values to 1e-6 relative, as
// the bindings check). The files are found under $DDS_VECTORS_DIR, else
// DDS_SOURCE_DIR/tests/vectors (a compile definition added in tests/CMakeLists.txt).
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.h"

using namespace tu;

#ifndef DDS_SOURCE_DIR
#define DDS_SOURCE_DIR "."
#endif

namespace {

struct VCase {
  std::string name;
  std::map<std::string, std::vector<std::string>> keys;
  bool has(const std::string& k) const { return keys.count(k) != 0; }
  const std::vector<std::string>& get(const std::string& k) const {
    auto it = keys.find(k);
    REQUIRE_MESSAGE(it != keys.end(), name << ": key " << k << " missing");
    return it->second;
  }
  long long scalar(const std::string& k, long long def) const {
    return has(k) ? std::stoll(get(k).at(0)) : def;
  }
  std::string word(const std::string& k, const std::string& def) const {
    return has(k) ? get(k).at(0) : def;
  }
  std::vector<int32_t> ints(const std::string& k, size_t n) const {
    std::vector<int32_t> v;
    if (!has(k)) return v;
    for (const auto& s : get(k)) v.push_back((int32_t)std::stol(s));
    REQUIRE_MESSAGE(v.size() == n, name << ": " << k << " has " << v.size() << " values, not " << n);
    return v;
  }
  std::vector<uint64_t> u64s(const std::string& k, size_t n) const {
    std::vector<uint64_t> v;
    if (!has(k)) return v;
    for (const auto& s : get(k)) v.push_back(std::stoull(s));
    REQUIRE(v.size() == n);
    return v;
  }
  std::vector<uint32_t> u32s(const std::string& k, size_t n) const {
    std::vector<uint32_t> v;
    if (!has(k)) return v;
    for (const auto& s : get(k)) v.push_back((uint32_t)std::stoul(s));
    REQUIRE(v.size() == n);
    return v;
  }
  std::vector<float> floats(const std::string& k, size_t n) const {
    std::vector<float> v;
    if (!has(k)) return v;
    for (const auto& s : get(k)) {
      if (s == "nan" || s == "-nan")
        v.push_back(kNaN);
      else if (s == "inf")
        v.push_back(kInf);
      else if (s == "-inf")
        v.push_back(-kInf);
      else
        v.push_back(std::strtof(s.c_str(), nullptr));
    }
    REQUIRE_MESSAGE(v.size() == n, name << ": " << k << " has " << v.size() << " values, not " << n);
    return v;
  }
};

std::vector<VCase> parse(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::vector<VCase> cases;
  VCase cur;
  bool open = false;
  std::string line;
  int ln = 0;
  while (std::getline(in, line)) {
    ++ln;
    std::istringstream ss(line);
    std::string key;
    if (!(ss >> key) || key[0] == '#') continue;
    std::vector<std::string> vals;
    for (std::string v; ss >> v;) vals.push_back(v);
    if (key == "case") {
      REQUIRE_MESSAGE(!open, path << ":" << ln << ": case inside a case");
      cur = VCase();
      for (size_t i = 0; i < vals.size(); ++i) cur.name += (i ? " " : "") + vals[i];
      open = true;
    } else if (key == "end") {
      REQUIRE_MESSAGE(open, path << ":" << ln << ": end outside a case");
      cases.push_back(cur);
      open = false;
    } else {
      REQUIRE_MESSAGE(open, path << ":" << ln << ": key outside a case");
      REQUIRE_MESSAGE(!cur.has(key), path << ":" << ln << ": key " << key << " twice");
      cur.keys[key] = vals;
    }
  }
  REQUIRE_MESSAGE(!open, path << ": unterminated case");
  return cases;
}

std::string vectors_dir() {
  if (const char* d = std::getenv("DDS_VECTORS_DIR")) return d;
  return std::string(DDS_SOURCE_DIR) + "/tests/vectors";
}

int32_t dtype_of(const std::string& w) {
  if (w == "f32") return DDS_DTYPE_F32;
  if (w == "bf16") return DDS_DTYPE_BF16;
  REQUIRE(w == "f16");
  return DDS_DTYPE_F16;
}

// Encodes floats in the case's dtype (they are already representable).
struct Logits {
  std::vector<float> f;
  std::vector<uint16_t> h;
  int32_t dtype;
  Logits(std::vector<float> v, int32_t dt) : f(std::move(v)), dtype(dt) {
    if (dt == DDS_DTYPE_F32) return;
    for (float x : f) {
      const uint16_t e = dt == DDS_DTYPE_BF16 ? dds::f32_to_bf16(x) : dds::f32_to_f16(x);
      const float back = dt == DDS_DTYPE_BF16 ? dds::bf16_to_f32(e) : dds::f16_to_f32(e);
      CHECK((std::isnan(x) || back == x));  // the file holds dtype-exact values
      h.push_back(e);
    }
  }
  const void* data() const { return dtype == DDS_DTYPE_F32 ? (const void*)f.data() : h.data(); }
};

bool same_value(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs((double)got - want) <= 1e-6 * std::fabs((double)want) + 1e-12;
}

template <typename T>
T* opt(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace

TEST_CASE("sample_vectors.txt is reproduced") {
  const auto cases = parse(vectors_dir() + "/sample_vectors.txt");
  CHECK(cases.size() >= 8);
  for (const VCase& c : cases) {
    CAPTURE(c.name);
    const int32_t V = (int32_t)c.scalar("vocab", 0), N = (int32_t)c.scalar("num_rows", 0),
                  R = (int32_t)c.scalar("num_requests", 0);
    const int32_t dt = dtype_of(c.word("dtype", "f32"));
    const int32_t U = (int32_t)c.scalar("uncond_num_rows", 0);
    auto offs = c.ints("row_offsets", R + 1);
    auto pos = c.ints("positions", N);
    auto temps = c.floats("temperatures", R), gs = c.floats("guidance_scales", R);
    auto uoffs = c.ints("uncond_row_offsets", R);
    auto tks = c.ints("top_ks", R);
    auto tps = c.floats("top_ps", R), mps = c.floats("min_ps", R);
    auto seeds = c.u64s("seeds", R);
    auto steps = c.u32s("steps", R);
    const Logits lg(c.floats("logits", (size_t)N * V), dt);
    const Logits ul(c.floats("uncond_logits", (size_t)U * V), dt);
    const std::string stats = c.word("stats", "processed");
    REQUIRE((stats == "processed" || stats == "guided"));
    Sampler s(V, std::max(N, 1), std::max(R, 1));
    dds_sample_args a = sample_args();
    a.num_rows = N;
    a.num_requests = R;
    a.row_offsets = opt(offs);
    a.positions = opt(pos);
    a.logits = lg.data();
    a.dtype = dt;
    if (c.has("uncond_logits")) {
      a.uncond_logits = ul.data();
      a.uncond_num_rows = U;
      a.uncond_row_offsets = opt(uoffs);
    }
    a.temperatures = opt(temps);
    a.guidance_scales = opt(gs);
    a.top_ks = opt(tks);
    a.top_ps = opt(tps);
    a.min_ps = opt(mps);
    a.seeds = opt(seeds);
    a.steps = opt(steps);
    a.banned_token = (int32_t)c.scalar("banned_token", -1);
    a.stats = stats == "guided" ? DDS_STATS_GUIDED : DDS_STATS_PROCESSED;
    Outputs o = run_sample(s, a);
    CHECK(o.tokens == c.ints("expect_tokens", N));
    CHECK(o.argmax == c.ints("expect_argmax", N));
    CHECK(o.status == c.ints("expect_request_status", R));
    const char* fkeys[4] = {"expect_logprobs", "expect_confidence", "expect_margin",
                            "expect_entropy"};
    const std::vector<float>* got[4] = {&o.logprobs, &o.confidence, &o.margin, &o.entropy};
    for (int k = 0; k < 4; ++k) {
      CAPTURE(fkeys[k]);
      const auto want = c.floats(fkeys[k], N);
      for (int i = 0; i < N; ++i) {
        CAPTURE(i);
        CHECK(same_value((*got[k])[i], want[i]));
      }
    }
  }
}

TEST_CASE("stash_vectors.txt is reproduced") {
  const auto cases = parse(vectors_dir() + "/stash_vectors.txt");
  CHECK(cases.size() >= 4);
  for (const VCase& c : cases) {
    CAPTURE(c.name);
    const int32_t V = (int32_t)c.scalar("vocab", 0), N = (int32_t)c.scalar("num_rows", 0),
                  R = (int32_t)c.scalar("num_requests", 0);
    const int32_t dt = dtype_of(c.word("dtype", "f32"));
    const int32_t n = (int32_t)c.scalar("num_top", 20), S = (int32_t)c.scalar("num_slots", 0),
                  RPS = (int32_t)c.scalar("rows_per_slot", 0);
    auto offs = c.ints("row_offsets", R + 1);
    const Logits lg(c.floats("logits", (size_t)N * V), dt);
    auto keep_i = c.ints("keep", R);
    std::vector<uint8_t> keep(keep_i.begin(), keep_i.end());
    auto slots = c.ints("slots", R), nvalid = c.ints("num_valid", R);
    auto temps = c.floats("temperatures", R);
    auto committed = c.ints("committed_tokens", N);
    auto ids = c.ints("token_ids", (size_t)R * n), nids = c.ints("num_token_ids", R);
    const size_t size = (size_t)S * RPS * (n + 1);
    std::vector<int32_t> oid(size, (int32_t)c.scalar("poison_id", -7)),
        ork(size, (int32_t)c.scalar("poison_rank", -9));
    std::vector<float> olp(size, c.has("poison_value") ? c.floats("poison_value", 1)[0] : 12345.f);
    Sampler s(V, std::max(N, 1), std::max(R, 1), std::max(n, 1));
    dds_stash_args a = stash_args();
    a.num_rows = N;
    a.num_requests = R;
    a.row_offsets = opt(offs);
    a.logits = lg.data();
    a.dtype = dt;
    a.keep = opt(keep);
    a.slots = opt(slots);
    a.num_valid = opt(nvalid);
    a.temperatures = opt(temps);
    a.committed_tokens = opt(committed);
    a.token_ids = opt(ids);
    a.num_token_ids = opt(nids);
    a.num_top = n;
    a.logits_mode = (int32_t)c.scalar("logits_mode", 0);
    a.num_slots = S;
    a.rows_per_slot = RPS;
    a.out_token_ids = oid.data();
    a.out_logprobs = olp.data();
    a.out_ranks = ork.data();
    const dds_status st = dds_stash_logprobs(s, &a, nullptr);
    INFO(dds_last_error());
    REQUIRE(st == DDS_OK);
    CHECK(oid == c.ints("expect_token_ids", size));
    CHECK(ork == c.ints("expect_ranks", size));
    const auto want = c.floats("expect_logprobs", size);
    for (size_t i = 0; i < size; ++i) {
      CAPTURE(i);
      CHECK(same_value(olp[i], want[i]));
    }
  }
}
