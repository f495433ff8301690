// libFuzzer target: dds_sampler_config_init / dds_create / dds_destroy / dds_sampler_backend and
// the *_args_init functions, with every config field (struct_size included) from the input.
//
// Oracle: dds_create succeeds exactly when the config obeys the rules of include/dds/dds.h
// (struct_size >= the first version, backend CPU, vocab_size >= 1, max_rows >= 1,
// max_requests >= 1, max_stash_width in [0, 1024], no unknown flag bits); the CUDA backend in a
// build or on a machine without it gives DDS_ERR_NO_DEVICE / DDS_ERR_UNSUPPORTED (or
// DDS_ERR_INVALID_ARGUMENT naming config->device for a negative ordinal). On failure *out is
// NULL and dds_last_error() names the argument; on success the sampler samples a tiny row
// correctly (the token is in [0, V)) and is destroyed (LeakSanitizer checks nothing leaks).
#include <algorithm>
#include <cstddef>

#include "fuzz_common.h"

using namespace fz;

extern "C" const char* fuzz_status_string_of_int(int32_t v);  // fuzz_status.c

namespace {

int32_t pick_i32(FuzzedDataProvider& in, std::initializer_list<int32_t> specials) {
  const uint8_t c = in.ConsumeIntegral<uint8_t>();
  if (c < 160) return *(specials.begin() + c % specials.size());
  if (c < 230) return in.ConsumeIntegralInRange<int32_t>(-4, 2000);
  return in.ConsumeIntegral<int32_t>();
}

// *_init with any struct_size into an exactly sized buffer: below the first version (v1: the
// size of the oldest struct accepted) it fails and writes nothing; otherwise it writes
// struct_size, nothing past it, and zeroes every byte past the known struct.
template <typename S, typename Init>
void check_init(FuzzedDataProvider& in, Init init, const char* what, size_t v1 = sizeof(S)) {
  const size_t sz = in.ConsumeIntegralInRange<size_t>(0, sizeof(S) + 64);
  std::unique_ptr<unsigned char[]> buf(new unsigned char[std::max<size_t>(sz, sizeof(S))]);
  std::memset(buf.get(), 0xa5, std::max<size_t>(sz, sizeof(S)));
  const dds_status st = init(reinterpret_cast<S*>(buf.get()), sz);
  if (sz < v1) {
    FUZZ_CHECK(st == DDS_ERR_STRUCT_SIZE, "%s(struct_size %zu): %s", what, sz, dds_status_string(st));
    check_error_message(st);
    for (size_t i = 0; i < sizeof(S); ++i)
      FUZZ_CHECK(buf[i] == 0xa5, "%s wrote into a struct it rejected", what);
  } else {
    FUZZ_CHECK(st == DDS_OK, "%s(struct_size %zu): %s", what, sz, dds_status_string(st));
    size_t got;
    std::memcpy(&got, buf.get(), sizeof got);
    FUZZ_CHECK(got == sz, "%s: struct_size %zu written as %zu", what, sz, got);
    for (size_t i = sizeof(S); i < sz; ++i)
      FUZZ_CHECK(buf[i] == 0, "%s: byte %zu past the struct not zeroed", what, i);
    for (size_t i = sz; i < sizeof(S); ++i)
      FUZZ_CHECK(buf[i] == 0xa5, "%s: byte %zu past struct_size written", what, i);
  }
  FUZZ_CHECK(init(nullptr, sizeof(S)) == DDS_ERR_NULL_POINTER, "%s(NULL)", what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);

  switch (in.ConsumeIntegral<uint8_t>() % 4) {
    case 0:
      check_init<dds_sampler_config>(in, dds_sampler_config_init, "dds_sampler_config_init",
                                     offsetof(dds_sampler_config, num_threads));
      break;
    case 1:  // the first version ends before the allowed-token masks
      check_init<dds_sample_args>(in, dds_sample_args_init, "dds_sample_args_init",
                                  offsetof(dds_sample_args, allowed_token_masks));
      break;
    case 2:
      check_init<dds_stash_args>(in, dds_stash_args_init, "dds_stash_args_init",
                                 offsetof(dds_stash_args, allowed_token_masks));
      break;
    default: {
      // Any int, as a C caller or a binding may pass it (fuzz_status.c: in C that is defined).
      const int32_t s = in.ConsumeIntegral<int32_t>();
      const char* str = fuzz_status_string_of_int(s);
      FUZZ_CHECK(str != nullptr, "status string NULL");
      if (s < 0 || s > DDS_ERR_INTERNAL)
        FUZZ_CHECK(std::strcmp(str, "DDS_UNKNOWN_STATUS") == 0, "status %d: %s", s, str);
    }
  }

  // A config with every field drawn; struct_size may be smaller or larger than the struct
  // (a larger one is backed by that many bytes, as a newer caller's struct would be).
  dds_sampler_config base;
  if (dds_sampler_config_init(&base, sizeof base) != DDS_OK) FUZZ_FAIL("config_init");
  const uint8_t ssel = in.ConsumeIntegral<uint8_t>();
  size_t struct_size = sizeof base;
  if (ssel < 16) struct_size = in.ConsumeIntegralInRange<size_t>(0, sizeof base - 1);
  else if (ssel < 32) struct_size = sizeof base + in.ConsumeIntegralInRange<size_t>(1, 64);
  base.backend = pick_i32(in, {DDS_BACKEND_CPU, DDS_BACKEND_CPU, DDS_BACKEND_CPU, DDS_BACKEND_CUDA, 2, -1});
  base.device = pick_i32(in, {0, 0, 1, -1, 7});
  base.vocab_size = pick_i32(in, {1, 2, 7, 1024, 1025, 0, -1, INT32_MIN, 32000, 3});
  base.max_rows = pick_i32(in, {1, 4096, 0, -1, 3, INT32_MAX});
  base.max_requests = pick_i32(in, {1, 1024, 0, -1, 2, INT32_MAX});
  base.max_stash_width = pick_i32(in, {20, 0, 1024, 1025, -1, 1, 5});
  const uint8_t fsel = in.ConsumeIntegral<uint8_t>();
  base.flags = fsel < 128 ? 0u : fsel < 200 ? DDS_FLAG_DEBUG_CHECKS : in.ConsumeIntegral<uint32_t>();
  base.num_threads = pick_i32(in, {0, 0, 1, 2, 256, -1, 257});
  // The oldest struct accepted ends before num_threads (appended later); a struct_size that does
  // not reach num_threads leaves it at its default (0).
  const size_t v1_size = offsetof(dds_sampler_config, num_threads);
  // What dds_create reads: the caller's struct_size bytes over the defaults (a struct_size that
  // ends inside num_threads takes that many of its bytes).
  int32_t threads = 0;
  if (struct_size > v1_size)
    std::memcpy(&threads, reinterpret_cast<const unsigned char*>(&base) + v1_size,
                std::min(struct_size - v1_size, sizeof threads));
  std::unique_ptr<unsigned char[]> cfgmem(new unsigned char[std::max(struct_size, sizeof base)]);
  std::memset(cfgmem.get(), 0, std::max(struct_size, sizeof base));
  base.struct_size = struct_size;
  std::memcpy(cfgmem.get(), &base, sizeof base);
  const dds_sampler_config* cfg = reinterpret_cast<const dds_sampler_config*>(cfgmem.get());

  const uint8_t nsel = in.ConsumeIntegral<uint8_t>();
  dds_sampler* s = reinterpret_cast<dds_sampler*>(&base);  // poison: must become NULL on error
  dds_status st;
  const char* expect = nullptr;
  if (nsel < 8) {
    st = dds_create(nullptr, &s);
    expect = "config";
    FUZZ_CHECK(st == DDS_ERR_NULL_POINTER && s == nullptr, "dds_create(NULL config)");
  } else if (nsel < 16) {
    st = dds_create(cfg, nullptr);
    expect = "out";
    FUZZ_CHECK(st == DDS_ERR_NULL_POINTER, "dds_create(out NULL)");
    check_error_message(st, "out is NULL");
    return 0;
  } else {
    st = dds_create(cfg, &s);
  }

  bool valid = struct_size >= v1_size && base.vocab_size >= 1 && base.max_rows >= 1 &&
               base.max_requests >= 1 && base.max_stash_width >= 0 &&
               base.max_stash_width <= 1024 && (base.flags & ~(uint32_t)DDS_FLAG_DEBUG_CHECKS) == 0 &&
               threads >= 0 && threads <= 256;
  if (nsel >= 16) {
    if (struct_size < v1_size) expect = "struct_size";
    else if (base.backend != DDS_BACKEND_CPU && base.backend != DDS_BACKEND_CUDA) expect = "backend";
    else if (base.vocab_size < 1) expect = "vocab_size";
    else if (base.max_rows < 1) expect = "max_rows";
    else if (base.max_requests < 1) expect = "max_requests";
    else if (base.max_stash_width < 0 || base.max_stash_width > 1024) expect = "max_stash_width";
    else if (base.backend == DDS_BACKEND_CPU && (base.flags & ~(uint32_t)DDS_FLAG_DEBUG_CHECKS) == 0 &&
             (threads < 0 || threads > 256))
      expect = "num_threads";
  }

  if (st != DDS_OK) {
    FUZZ_CHECK(s == nullptr, "dds_create failed (%s) but *out is not NULL", dds_status_string(st));
    check_error_message(st);
    if (expect)
      FUZZ_CHECK(std::strstr(dds_last_error(), expect) != nullptr, "error does not name %s", expect);
    if (nsel >= 16 && valid && base.backend == DDS_BACKEND_CPU)
      FUZZ_FAIL("a valid CPU config was rejected with %s", dds_status_string(st));
    if (nsel >= 16 && valid && base.backend == DDS_BACKEND_CUDA && !dds_has_cuda())
      FUZZ_CHECK(st == DDS_ERR_NO_DEVICE || st == DDS_ERR_UNSUPPORTED ||
                     (base.device < 0 && st == DDS_ERR_INVALID_ARGUMENT),
                 "CUDA backend without CUDA: %s", dds_status_string(st));
    return 0;
  }
  FUZZ_CHECK(valid, "dds_create accepted an invalid config (struct_size %zu, backend %d, V %d, "
             "max_rows %d, max_requests %d, max_stash_width %d, flags 0x%x)",
             struct_size, base.backend, base.vocab_size, base.max_rows, base.max_requests,
             base.max_stash_width, base.flags);
  FUZZ_CHECK(s != nullptr, "DDS_OK with *out NULL");
  int32_t be = -1;
  FUZZ_CHECK(dds_sampler_backend(s, &be) == DDS_OK && be == base.backend, "backend %d", be);
  FUZZ_CHECK(dds_sampler_backend(nullptr, &be) == DDS_ERR_NULL_POINTER, "backend(NULL)");
  FUZZ_CHECK(dds_sampler_backend(s, nullptr) == DDS_ERR_NULL_POINTER, "backend(s, NULL)");

  // A tiny call on the new sampler (small vocabularies only: the CPU backend allocates V).
  if (base.backend == DDS_BACKEND_CPU && base.vocab_size <= 4096) {
    const int32_t V = base.vocab_size;
    std::vector<float> logits((size_t)V);
    for (int32_t t = 0; t < V; ++t) logits[t] = pick_logit(in);
    dds_sample_args a;
    dds_sample_args_init(&a, sizeof a);
    a.num_rows = 1;
    a.num_requests = 1;
    a.logits = logits.data();
    a.temperature = pick_temperature(in);
    std::unique_ptr<int32_t[]> tok(new int32_t[1]);
    tok[0] = (int32_t)kPoison32;
    a.tokens = tok.get();
    const dds_status s2 = dds_sample(s, &a, nullptr);
    if (s2 == DDS_OK) {
      FUZZ_CHECK(tok[0] >= 0 && tok[0] < V, "token %d out of [0, %d)", tok[0], V);
    } else {
      check_error_message(s2);
      FUZZ_CHECK(std::strstr(dds_last_error(), "temperature") != nullptr, "tiny call: %s",
                 dds_status_string(s2));
      FUZZ_CHECK(tok[0] == (int32_t)kPoison32, "written on error");
    }
  }
  FUZZ_CHECK(dds_destroy(s) == DDS_OK, "dds_destroy");
  FUZZ_CHECK(dds_destroy(nullptr) == DDS_OK, "dds_destroy(NULL)");
  return 0;
}
