// Shared helpers of the dds libFuzzer targets (tests/fuzz/fuzz_*.cpp).
//
// Every target draws every size, offset, stride, dtype, pointer presence and per-request value
// from the fuzz input, allocates each buffer at exactly the size the arguments describe (so an
// out-of-bounds access is an ASan report, not luck), poisons every output, calls the API and
// then checks the contract, not only survival:
//   - DDS_OK: every element the contract says is written no longer holds the poison, every
//     element it says is not written still does, and the values obey the documented rules;
//   - an error: nothing is written, dds_last_error() is non-empty and names an argument.
// A broken contract calls FUZZ_FAIL, which prints what broke and aborts (a libFuzzer crash).
#ifndef DDS_TESTS_FUZZ_FUZZ_COMMON_H_
#define DDS_TESTS_FUZZ_FUZZ_COMMON_H_

#include <dds/dds.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cfloat>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace fz {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Poison patterns: a float NaN with a payload no computation produces, an int32 no valid token,
// rank or status bit set can equal, and a 16-bit pattern that is a negative bf16 / f16 number.
constexpr uint32_t kPoison32 = 0x7fa5a5a5u;
constexpr uint16_t kPoison16 = 0xa5a5u;

[[noreturn]] inline void fail_impl(const char* file, int line, const char* fmt, ...) {
  std::fprintf(stderr, "\n*** dds fuzz contract violation at %s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n    dds_last_error() = \"%s\"\n", dds_last_error());
  std::fflush(stderr);
  std::abort();
}
#define FUZZ_FAIL(...) ::fz::fail_impl(__FILE__, __LINE__, __VA_ARGS__)
#define FUZZ_CHECK(cond, ...) \
  do {                        \
    if (!(cond)) FUZZ_FAIL("check `" #cond "` failed: " __VA_ARGS__); \
  } while (0)

inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// A buffer of exactly `bytes` bytes (plus `misalign` leading bytes when the pointer is to be
// misaligned on purpose), filled with the poison.
// new[] of exactly n bytes, even n = 0 (a unique non-NULL pointer that ASan knows is empty).
struct Mem {
  std::unique_ptr<unsigned char[]> p;
  size_t n = 0;
  void assign(size_t bytes) {
    p.reset(new unsigned char[bytes]);
    n = bytes;
    if (bytes) std::memset(p.get(), 0, bytes);
  }
  bool empty() const { return !p; }
  unsigned char* data() const { return p.get(); }
};

struct Buf {
  Mem mem;
  size_t misalign = 0;
  size_t bytes = 0;
  void alloc(size_t nbytes, size_t mis, size_t elem) {
    misalign = mis;
    bytes = nbytes;
    mem.assign(nbytes + mis);
    poison(elem);
  }
  void poison(size_t elem) {
    unsigned char* p = data();
    if (elem == 2) {
      for (size_t i = 0; i + 2 <= bytes; i += 2) std::memcpy(p + i, &kPoison16, 2);
    } else {
      for (size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(p + i, &kPoison32, 4);
    }
  }
  unsigned char* data() { return mem.empty() ? nullptr : mem.data() + misalign; }
  bool is_poison32(size_t i) const {
    uint32_t v;
    std::memcpy(&v, mem.data() + misalign + 4 * i, 4);
    return v == kPoison32;
  }
  bool is_poison16(size_t i) const {
    uint16_t v;
    std::memcpy(&v, mem.data() + misalign + 2 * i, 2);
    return v == kPoison16;
  }
  bool all_poison(size_t elem) const {
    const size_t n = bytes / elem;
    for (size_t i = 0; i < n; ++i)
      if (elem == 2 ? !is_poison16(i) : !is_poison32(i)) return false;
    return true;
  }
  int32_t i32(size_t i) const {
    int32_t v;
    std::memcpy(&v, mem.data() + misalign + 4 * i, 4);
    return v;
  }
  float f32(size_t i) const {
    float v;
    std::memcpy(&v, mem.data() + misalign + 4 * i, 4);
    return v;
  }
  uint16_t u16(size_t i) const {
    uint16_t v;
    std::memcpy(&v, mem.data() + misalign + 2 * i, 2);
    return v;
  }
};

// Input arrays: exactly sized copies of generated values (optionally misaligned by one byte).
template <typename T>
struct Arr {
  Mem mem;
  size_t n = 0;
  size_t misalign = 0;
  void set(const std::vector<T>& v, size_t mis = 0) {
    n = v.size();
    misalign = mis;
    mem.assign(n * sizeof(T) + mis);
    if (n) std::memcpy(mem.data() + mis, v.data(), n * sizeof(T));
  }
  const T* ptr() const {
    return mem.empty() ? nullptr : reinterpret_cast<const T*>(mem.data() + misalign);
  }
  T at(size_t i) const {
    T v;
    std::memcpy(&v, mem.data() + misalign + i * sizeof(T), sizeof(T));
    return v;
  }
};

// Floats that matter to the sanitisation and overflow rules, or raw bits from the input.
inline float pick_float(FuzzedDataProvider& in, const float* table, size_t n) {
  const uint8_t c = in.ConsumeIntegral<uint8_t>();
  if (c < 200) return table[c % n];
  return from_bits(in.ConsumeIntegral<uint32_t>());
}

inline float pick_temperature(FuzzedDataProvider& in) {
  static const float t[] = {1.f,   0.f,     0.5f,     2.f,   1e-30f, 1e-40f,  1e30f,   FLT_MAX,
                            kNaN,  kInf,    -kInf,    -1.f,  -0.f,   1e-38f,  3e-39f,  2.9e-39f,
                            1e-45f, 0.7f,   1.f,      1.f,   1.f,    0.9f,    1.3f,    0.f};
  return pick_float(in, t, sizeof t / sizeof t[0]);
}
inline float pick_guidance(FuzzedDataProvider& in) {
  static const float t[] = {0.f,  1.f,   2.f,  -1.f,   1e30f, -1e30f, kNaN,    kInf, -kInf,
                            0.5f, 1e-40f, -0.f, FLT_MAX, 3.f,   0.f,    0.f,     1.5f};
  return pick_float(in, t, sizeof t / sizeof t[0]);
}
inline float pick_top_p(FuzzedDataProvider& in) {
  static const float t[] = {1.f, 0.9f,  0.5f, 0.f,  -0.5f, 1.5f,   kNaN, kInf, -kInf,
                            1e-40f, 0.99f, 0.1f, 1.f, 1.f,  0.3f, -0.f, 1e-30f};
  return pick_float(in, t, sizeof t / sizeof t[0]);
}
inline float pick_min_p(FuzzedDataProvider& in) {
  static const float t[] = {0.f, 0.1f,  0.5f, 1.f,    1.5f,  kNaN, -0.1f, kInf,
                            -kInf, 1e-40f, 0.f, 0.f,  0.05f, 0.99f, -0.f, 1e-30f};
  return pick_float(in, t, sizeof t / sizeof t[0]);
}
inline int32_t pick_top_k(FuzzedDataProvider& in, int32_t V) {
  const uint8_t c = in.ConsumeIntegral<uint8_t>();
  switch (c % 12) {
    case 0: return 0;
    case 1: return 1;
    case 2: return 2;
    case 3: return V - 1;
    case 4: return V;
    case 5: return V + 1;
    case 6: return -1;
    case 7: return INT32_MIN;
    case 8: return INT32_MAX;
    case 9: return 3;
    case 10: return 0;
    default: return in.ConsumeIntegral<int32_t>();
  }
}
// Once the input is used up, FuzzedDataProvider returns zeros; logits then come from a
// generator seeded by the input (set_fallback_seed), so short inputs still give varied rows.
inline uint64_t& fallback_state() {
  static uint64_t s = 1;
  return s;
}
inline void set_fallback_seed(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  fallback_state() = h | 1;
}
inline uint8_t fallback_byte() {
  uint64_t& x = fallback_state();
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return (uint8_t)(x >> 32);
}

// A logit: specials (NaN, +-inf, FLT_MAX, denormals, huge) or a small float from the input.
inline float pick_logit(FuzzedDataProvider& in) {
  const uint8_t c = in.remaining_bytes() ? in.ConsumeIntegral<uint8_t>() : fallback_byte();
  static const float t[] = {kNaN,     kInf,     -kInf, FLT_MAX, -FLT_MAX, 1e-40f, -1e-40f, 0.f,
                            -0.f,     1e30f,    -1e30f, 1e-45f, 88.f,     -88.f,  1e9f,    -1e9f,
                            3e38f,    -3e38f,   1e20f,  -1e20f};
  constexpr size_t n = sizeof t / sizeof t[0];
  if (c < 2 * n) return t[c % n];
  if (c < 250) return (float)(int8_t)(c * 37u) * 0.125f;  // small values with ties
  return from_bits(in.ConsumeIntegral<uint32_t>());
}

// An error message must name the argument that broke a rule.
// `other` is one more accepted name (e.g. "out" for dds_create's out parameter).
inline void check_error_message(dds_status st, const char* other = nullptr) {
  const char* m = dds_last_error();
  FUZZ_CHECK(m != nullptr && m[0] != '\0', "status %s with an empty dds_last_error()",
             dds_status_string(st));
  FUZZ_CHECK(std::strstr(m, "args") || std::strstr(m, "config") || std::strstr(m, "sampler") ||
                 (other && std::strstr(m, other)),
             "status %s: message names no argument: %s", dds_status_string(st), m);
  FUZZ_CHECK(std::strcmp(dds_status_string(st), "DDS_UNKNOWN_STATUS") != 0,
             "undocumented status %d", (int)st);
}

// Outcome counters, printed at exit when DDS_FUZZ_STATS is set (to see that the fuzzer reaches
// the interesting paths, not only the argument checks).
struct Counters {
  long n[8] = {0};
  static const char* name(int i) {
    static const char* const k[8] = {"ok_calls", "ok_rows", "guided_rows", "filtered_rows",
                                     "greedy_rows", "empty_rows", "error_calls", "rule_breaks"};
    return k[i];
  }
};
inline Counters& counters() {
  static Counters* c = [] {
    Counters* p = new Counters;
    if (std::getenv("DDS_FUZZ_STATS"))
      std::atexit([] {
        for (int i = 0; i < 8; ++i) std::fprintf(stderr, "%s=%ld ", Counters::name(i), counters().n[i]);
        std::fprintf(stderr, "\n");
      });
    return p;
  }();
  return *c;
}
inline void count(int i) { ++counters().n[i]; }
enum { C_OK, C_OK_ROWS, C_GUIDED, C_FILTERED, C_GREEDY, C_EMPTY, C_ERROR, C_RULE_BREAK };

struct SamplerGuard {
  dds_sampler* s = nullptr;
  ~SamplerGuard() {
    if (s) dds_destroy(s);
  }
};

}  // namespace fz

#endif  // DDS_TESTS_FUZZ_FUZZ_COMMON_H_
