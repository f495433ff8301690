// libFuzzer target: dds_sample on the CPU backend.
//
// The input draws a sampler (V, capacities, debug flag) and a dds_sample_args: layout (rows,
// requests, row offsets, positions), dtype, strides, guidance (uncond rows, offsets, scales),
// per-request arrays holding hostile values (NaN, +-inf, negative, denormal, huge), scalars,
// the banned token, the stats mode, which outputs are given, probs dtype and stride, and then at
// most one deliberate rule break (mutation) or a "chaos" rewrite of the layout fields. Every
// buffer is allocated at exactly the size the final arguments describe.
//
// Oracle: a mutation must fail with a message naming the field it broke; an unmutated call must
// succeed (or, in debug mode, fail with DDS_ERR_INVALID_VALUE naming the request when a
// per-request value is out of range); a chaos call may do either. On DDS_OK every output row is
// written, probs padding and rows are untouched, request_status equals the flags that
// docs/sampling.md §1-2 prescribe, tokens and argmax are in [0, V) and obey greedy / top-k /
// top-p / min-p, statistics are in range; on an error nothing is written.
#include <algorithm>

#include "dtype.h"
#include "fuzz_common.h"

using namespace fz;

namespace {

enum Oracle { MUST_OK, MUST_FAIL, ANY };

float load_elem(const Arr<unsigned char>& a, int32_t dtype, int64_t idx) {
  if (dtype == DDS_DTYPE_F32) {
    float v;
    std::memcpy(&v, a.ptr() + 4 * idx, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, a.ptr() + 2 * idx, 2);
  return dtype == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
}

size_t dsize(int32_t dtype) { return dtype == DDS_DTYPE_F32 ? 4 : 2; }

// Elements of a [rows, stride] matrix whose rows hold V columns: (rows-1)*stride + V.
size_t matrix_elems(int64_t rows, int64_t stride, int32_t V) {
  if (rows <= 0) return 0;
  const int64_t eff = stride <= 0 ? V : stride;
  if (rows == 1) return (size_t)V;
  return (size_t)((rows - 1) * std::max<int64_t>(eff, V) + V);
}

// A stride: 0 (= V), V, V + a little, or (single row only) something huge.
int64_t pick_stride(FuzzedDataProvider& in, int32_t V, int32_t rows) {
  switch (in.ConsumeIntegral<uint8_t>() % 6) {
    case 0:
    case 1: return 0;
    case 2: return V;
    case 3: return V + 1 + in.ConsumeIntegralInRange<int32_t>(0, 6);
    case 4: return rows <= 1 ? (int64_t)1 << 40 : V + 3;
    default: return rows <= 1 ? INT64_MAX : V;
  }
}

struct Mutation {
  const char* name;  // substring the error message must contain
  dds_status code;   // expected status (DDS_OK = any error)
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  set_fallback_seed(data, size);

  // ---- sampler -----------------------------------------------------------------------------
  const uint8_t vsel = in.ConsumeIntegral<uint8_t>();
  const int32_t V = vsel < 244 ? 1 + vsel % 40 : 1020 + vsel % 12;  // sometimes 2 blocks
  const int32_t max_rows = in.ConsumeIntegralInRange<int32_t>(1, 10);
  const int32_t max_req = in.ConsumeIntegralInRange<int32_t>(1, 10);
  const bool debug = (in.ConsumeIntegral<uint8_t>() & 7) == 0;
  dds_sampler_config cfg;
  if (dds_sampler_config_init(&cfg, sizeof cfg) != DDS_OK) FUZZ_FAIL("config_init");
  cfg.backend = DDS_BACKEND_CPU;
  cfg.vocab_size = V;
  cfg.max_rows = max_rows;
  cfg.max_requests = max_req;
  cfg.flags = debug ? DDS_FLAG_DEBUG_CHECKS : 0u;
  SamplerGuard sg;
  if (dds_create(&cfg, &sg.s) != DDS_OK) FUZZ_FAIL("dds_create of a valid config failed");

  // ---- a valid call ------------------------------------------------------------------------
  dds_sample_args a;
  if (dds_sample_args_init(&a, sizeof a) != DDS_OK) FUZZ_FAIL("sample_args_init");
  int32_t num_rows = in.ConsumeIntegralInRange<int32_t>(0, max_rows);
  if (num_rows == 0 && in.ConsumeBool()) num_rows = 1;
  int32_t num_req =
      num_rows == 0 ? 1 : in.ConsumeIntegralInRange<int32_t>(1, std::min(num_rows, max_req));
  bool has_offsets = num_req != num_rows || in.ConsumeBool();
  std::vector<int32_t> offs;
  if (has_offsets) {
    offs.assign((size_t)num_req + 1, 0);
    for (int32_t r = 1; r < num_req; ++r) offs[r] = in.ConsumeIntegralInRange<int32_t>(0, num_rows);
    offs[num_req] = num_rows;
    std::sort(offs.begin(), offs.end());
  }
  const bool has_pos = in.ConsumeBool();
  std::vector<int32_t> pos;
  if (has_pos)
    for (int32_t i = 0; i < num_rows; ++i) pos.push_back(in.ConsumeIntegral<int32_t>());
  int32_t dtype = in.ConsumeIntegralInRange<int32_t>(0, 2);
  int64_t row_stride = pick_stride(in, V, num_rows);

  const bool has_uncond = in.ConsumeBool();
  bool has_uoffs = has_uncond && in.ConsumeBool();
  int32_t un_rows = 0;
  int64_t urow_stride = 0;
  std::vector<int32_t> uoffs;
  if (has_uncond) {
    un_rows = has_uoffs ? in.ConsumeIntegralInRange<int32_t>(0, num_rows + 2)
                        : num_rows + in.ConsumeIntegralInRange<int32_t>(0, 2);
    urow_stride = pick_stride(in, V, un_rows);
    if (has_uoffs)
      for (int32_t r = 0; r < num_req; ++r) {
        const uint8_t c = in.ConsumeIntegral<uint8_t>() % 5;
        uoffs.push_back(c == 0 ? -1 : c == 1 ? INT32_MIN : c == 2 ? INT32_MAX
                                                          : in.ConsumeIntegralInRange<int32_t>(-2, un_rows + 1));
      }
  }
  a.guidance_scale = in.ConsumeBool() ? 0.f : 1.5f;
  a.temperature = in.ConsumeBool() ? 0.f : 1.f;
  a.top_k = in.ConsumeBool() ? 0 : 2;
  a.top_p = in.ConsumeBool() ? 1.f : 0.8f;
  a.min_p = in.ConsumeBool() ? 0.f : 0.2f;
  a.seed = in.ConsumeIntegral<uint64_t>();
  a.step = in.ConsumeIntegral<uint32_t>();
  std::vector<float> temps, gs, tps, mps;
  std::vector<int32_t> tks;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
  const uint8_t have = in.ConsumeIntegral<uint8_t>();  // which per-request arrays are given
  for (int32_t r = 0; r < num_req; ++r) {
    if (have & 1) temps.push_back(pick_temperature(in));
    if (have & 2) gs.push_back(pick_guidance(in));
    if (have & 4) tks.push_back(pick_top_k(in, V));
    if (have & 8) tps.push_back(pick_top_p(in));
    if (have & 16) mps.push_back(pick_min_p(in));
    if (have & 32) seeds.push_back(in.ConsumeIntegral<uint64_t>());
    if (have & 64) steps.push_back(in.ConsumeIntegral<uint32_t>());
  }
  switch (in.ConsumeIntegral<uint8_t>() % 4) {
    case 0: a.banned_token = -1; break;
    case 1: a.banned_token = 0; break;
    case 2: a.banned_token = V - 1; break;
    default: a.banned_token = in.ConsumeIntegralInRange<int32_t>(0, V - 1);
  }
  a.stats = in.ConsumeBool() ? DDS_STATS_PROCESSED : DDS_STATS_GUIDED;
  uint8_t outs = in.ConsumeIntegral<uint8_t>();  // bits: tokens logprobs argmax conf margin ent probs status
  if ((outs & 0x7f) == 0) outs |= 1;
  const int32_t probs_dtype = in.ConsumeIntegralInRange<int32_t>(0, 2);
  int64_t probs_stride = pick_stride(in, V, num_rows);
  int32_t probs_dtype_arg = probs_dtype;
  int32_t dtype_arg = dtype;
  bool logits_null = false, args_null = false, sampler_null = false;
  size_t struct_size = sizeof a;
  int misalign_which = -1;  // index into the pointer table below

  // ---- at most one rule break, or chaos --------------------------------------------------
  Oracle oracle = MUST_OK;
  Mutation mut{nullptr, DDS_OK};
  const uint8_t msel = in.ConsumeIntegral<uint8_t>();
  const int32_t mk = msel < 64 ? 0 : 1 + msel % 31;
  auto must_fail = [&](const char* name, dds_status code = DDS_OK) {
    oracle = MUST_FAIL;
    mut = {name, code};
  };
  if (num_rows >= 1) switch (mk) {
      case 0: break;
      case 1: num_rows = -in.ConsumeIntegralInRange<int32_t>(1, 3); must_fail("num_rows"); break;
      case 2: num_rows = max_rows + in.ConsumeIntegralInRange<int32_t>(1, 3); must_fail("num_rows", DDS_ERR_CAPACITY); break;
      case 3: num_req = -in.ConsumeIntegralInRange<int32_t>(0, 2); must_fail("num_requests"); break;
      case 4:
        if (max_req < 10) { num_req = max_req + 1; must_fail("num_requests", DDS_ERR_CAPACITY); }
        break;
      case 5: if (has_offsets && debug) { offs[0] = 1; must_fail("row_offsets", DDS_ERR_INVALID_VALUE); } break;
      case 6:
        if (has_offsets && debug && num_req >= 2) { offs[1] = num_rows + 1; must_fail("row_offsets", DDS_ERR_INVALID_VALUE); }
        break;
      case 7: if (has_offsets && debug) { offs[num_req] = num_rows - 1; must_fail("row_offsets", DDS_ERR_INVALID_VALUE); } break;
      case 8: logits_null = true; must_fail("logits", DDS_ERR_NULL_POINTER); break;
      case 9: dtype_arg = in.ConsumeBool() ? 3 : -1; must_fail("dtype"); break;
      case 10:
        if (V > 1) { row_stride = in.ConsumeIntegralInRange<int64_t>(1, V - 1); must_fail("row_stride"); }
        else { row_stride = -1; must_fail("row_stride"); }
        break;
      case 11: if (has_uncond) { urow_stride = -5; must_fail("uncond_row_stride"); } break;
      case 12: if (has_uncond) { un_rows = -1; must_fail("uncond_num_rows"); } break;
      case 13:
        if (!has_uncond) {
          has_uoffs = true;
          uoffs.assign((size_t)num_req, 0);
          must_fail("uncond_row_offsets");
        }
        break;
      case 14: a.guidance_scale = in.ConsumeBool() ? kNaN : -kInf; must_fail("guidance_scale"); break;
      case 15: a.temperature = in.ConsumeBool() ? kNaN : (in.ConsumeBool() ? -1.f : kInf); must_fail("temperature"); break;
      case 16: a.top_k = -in.ConsumeIntegralInRange<int32_t>(1, INT32_MAX); must_fail("top_k"); break;
      case 17: a.top_p = kNaN; must_fail("top_p"); break;
      case 18: a.min_p = in.ConsumeBool() ? kNaN : -0.5f; must_fail("min_p"); break;
      case 19: a.banned_token = in.ConsumeBool() ? V : -2; must_fail("banned_token"); break;
      case 20: a.stats = 2; must_fail("stats"); break;
      case 21:
        if (outs & 64) { probs_dtype_arg = 7; must_fail("probs_dtype"); }
        break;
      case 22:
        if ((outs & 64) && V > 1) { probs_stride = V - 1; must_fail("probs_row_stride"); }
        break;
      case 23: outs &= 0x80; must_fail("output", DDS_ERR_NULL_POINTER); break;
      case 24: misalign_which = in.ConsumeIntegralInRange<int32_t>(0, 19); break;  // below
      case 25: struct_size = in.ConsumeIntegralInRange<size_t>(0, offsetof(dds_sample_args, allowed_token_masks) - 1); must_fail("struct_size", DDS_ERR_STRUCT_SIZE); break;
      case 26: sampler_null = true; must_fail("sampler", DDS_ERR_NULL_POINTER); break;
      case 27: args_null = true; must_fail("args", DDS_ERR_NULL_POINTER); break;
      case 28:
        if (num_req != num_rows) { has_offsets = false; must_fail("row_offsets"); }
        break;
      case 29:
        if (has_uncond && !has_uoffs && num_rows > 0) { un_rows = num_rows - 1; must_fail("uncond_num_rows"); }
        break;
      default: {  // chaos: raw layout fields, any outcome allowed, the contract still holds
        oracle = ANY;
        num_rows = in.ConsumeIntegralInRange<int32_t>(-2, max_rows + 2);
        num_req = in.ConsumeIntegralInRange<int32_t>(-2, max_req + 2);
        if (in.ConsumeBool()) {
          has_offsets = true;
          offs.assign((size_t)std::max(num_req + 1, 0), 0);
          for (auto& o : offs) o = in.ConsumeIntegralInRange<int32_t>(-1, std::max(num_rows, 0) + 1);
          if (in.ConsumeBool()) std::sort(offs.begin(), offs.end());
        } else {
          has_offsets = in.ConsumeBool();
          offs.resize((size_t)std::max(num_req + 1, 0));
        }
        if (has_uncond) un_rows = in.ConsumeIntegralInRange<int32_t>(-1, max_rows + 2);
        if (has_uoffs) {
          uoffs.resize((size_t)std::max(num_req, 0));
          for (auto& o : uoffs) o = in.ConsumeIntegralInRange<int32_t>(-2, max_rows + 2);
        }
        const int32_t nr = std::max(num_req, 0);
        temps.resize(temps.empty() ? 0 : nr, 1.f);
        gs.resize(gs.empty() ? 0 : nr, 0.f);
        tks.resize(tks.empty() ? 0 : nr, 0);
        tps.resize(tps.empty() ? 0 : nr, 1.f);
        mps.resize(mps.empty() ? 0 : nr, 0.f);
        seeds.resize(seeds.empty() ? 0 : nr, 0);
        steps.resize(steps.empty() ? 0 : nr, 0);
        pos.resize(has_pos ? (size_t)std::max(num_rows, 0) : 0, 0);
        break;
      }
    }

  // A huge stride is only drawn for a single row; a mutation or chaos that adds rows resets it
  // (no buffer can hold such a matrix, and a caller cannot have one).
  if (num_rows > 1 && row_stride > V + 64) row_stride = 0;
  if (num_rows > 1 && probs_stride > V + 64) probs_stride = 0;
  if (un_rows > 1 && urow_stride > V + 64) urow_stride = 0;

  // ---- exactly sized buffers ---------------------------------------------------------------
  const int32_t rows_alloc = std::max(num_rows, 0);
  const int32_t req_alloc = std::max(num_req, 0);
  Arr<unsigned char> logits, uncond;
  {
    const size_t n = matrix_elems(rows_alloc, row_stride, V);
    std::vector<unsigned char> v(n * dsize(dtype));
    for (size_t e = 0; e < n; ++e) {
      if (dtype == DDS_DTYPE_F32) {
        const float f = pick_logit(in);
        std::memcpy(&v[4 * e], &f, 4);
      } else {
        const uint16_t h = in.ConsumeBool() ? dds::f32_to_bf16(pick_logit(in)) : in.ConsumeIntegral<uint16_t>();
        const uint16_t hh = dtype == DDS_DTYPE_BF16 ? h : (in.ConsumeBool() ? dds::f32_to_f16(pick_logit(in)) : h);
        std::memcpy(&v[2 * e], &hh, 2);
      }
    }
    logits.set(v, misalign_which == 2 ? 1 : 0);
    if (has_uncond) {
      const size_t un = matrix_elems(std::max(un_rows, 0), urow_stride, V);
      std::vector<unsigned char> u(un * dsize(dtype));
      for (size_t e = 0; e < un; ++e) {
        if (dtype == DDS_DTYPE_F32) {
          const float f = pick_logit(in);
          std::memcpy(&u[4 * e], &f, 4);
        } else {
          const uint16_t h = in.ConsumeIntegral<uint16_t>();
          std::memcpy(&u[2 * e], &h, 2);
        }
      }
      uncond.set(u, misalign_which == 3 ? 1 : 0);
    }
  }
  // Pointer table: index -> name used by the misalignment mutation.
  static const char* const kNames[20] = {
      "row_offsets", "positions",  "logits",     "uncond_logits", "uncond_row_offsets",
      "guidance_scales", "temperatures", "top_ks", "top_ps",     "min_ps",
      "seeds",       "steps",      "tokens",     "logprobs",      "argmax",
      "confidence",  "margin",     "entropy",    "probs",         "request_status"};
  auto mis = [&](int idx) -> size_t { return misalign_which == idx ? 1 : 0; };
  Arr<int32_t> A_offs, A_pos, A_uoffs, A_tks;
  Arr<float> A_temps, A_gs, A_tps, A_mps;
  Arr<uint64_t> A_seeds;
  Arr<uint32_t> A_steps;
  if (has_offsets) A_offs.set(offs, mis(0));
  if (has_pos) { pos.resize(rows_alloc); A_pos.set(pos, mis(1)); }
  if (has_uoffs) A_uoffs.set(uoffs, mis(4));
  if (have & 2) { gs.resize(req_alloc, 0.f); A_gs.set(gs, mis(5)); }
  if (have & 1) { temps.resize(req_alloc, 1.f); A_temps.set(temps, mis(6)); }
  if (have & 4) { tks.resize(req_alloc, 0); A_tks.set(tks, mis(7)); }
  if (have & 8) { tps.resize(req_alloc, 1.f); A_tps.set(tps, mis(8)); }
  if (have & 16) { mps.resize(req_alloc, 0.f); A_mps.set(mps, mis(9)); }
  if (have & 32) { seeds.resize(req_alloc, 0); A_seeds.set(seeds, mis(10)); }
  if (have & 64) { steps.resize(req_alloc, 0); A_steps.set(steps, mis(11)); }

  const bool want[8] = {(outs & 1) != 0,  (outs & 2) != 0,  (outs & 4) != 0,  (outs & 8) != 0,
                        (outs & 16) != 0, (outs & 32) != 0, (outs & 64) != 0, (outs & 128) != 0};
  Buf o_tok, o_lp, o_am, o_conf, o_mar, o_ent, o_probs, o_status;
  if (want[0]) o_tok.alloc(4 * (size_t)rows_alloc, mis(12), 4);
  if (want[1]) o_lp.alloc(4 * (size_t)rows_alloc, mis(13), 4);
  if (want[2]) o_am.alloc(4 * (size_t)rows_alloc, mis(14), 4);
  if (want[3]) o_conf.alloc(4 * (size_t)rows_alloc, mis(15), 4);
  if (want[4]) o_mar.alloc(4 * (size_t)rows_alloc, mis(16), 4);
  if (want[5]) o_ent.alloc(4 * (size_t)rows_alloc, mis(17), 4);
  const size_t psz = dsize(probs_dtype);
  const int64_t p_eff = probs_stride == 0 ? V : probs_stride;
  if (want[6]) o_probs.alloc(psz * matrix_elems(rows_alloc, probs_stride, V), mis(18), psz);
  if (want[7]) o_status.alloc(4 * (size_t)req_alloc, mis(19), 4);

  if (misalign_which >= 0) {
    // Only a pointer that is given and whose alignment is > 1 can be misaligned.
    bool present = false;
    size_t align = 4;
    switch (misalign_which) {
      case 0: present = has_offsets; break;
      case 1: present = has_pos; break;
      case 2: present = true; align = dsize(dtype); break;
      case 3: present = has_uncond; align = dsize(dtype); break;
      case 4: present = has_uoffs; break;
      case 5: present = (have & 2) != 0; break;
      case 6: present = (have & 1) != 0; break;
      case 7: present = (have & 4) != 0; break;
      case 8: present = (have & 8) != 0; break;
      case 9: present = (have & 16) != 0; break;
      case 10: present = (have & 32) != 0; break;
      case 11: present = (have & 64) != 0; break;
      default: present = want[misalign_which - 12]; align = misalign_which == 18 ? psz : 4; break;
    }
    if (present && align > 1) must_fail(kNames[misalign_which]);
    else if (present) oracle = ANY;  // a 1-byte misalignment of a 2-byte type; fine either way
  }

  a.num_rows = num_rows;
  a.num_requests = num_req;
  a.row_offsets = has_offsets ? A_offs.ptr() : nullptr;
  a.positions = has_pos ? A_pos.ptr() : nullptr;
  a.logits = logits_null ? nullptr : logits.ptr();
  a.dtype = dtype_arg;
  a.row_stride = row_stride;
  a.uncond_logits = has_uncond ? uncond.ptr() : nullptr;
  a.uncond_row_stride = urow_stride;
  a.uncond_num_rows = un_rows;
  a.uncond_row_offsets = has_uoffs ? A_uoffs.ptr() : nullptr;
  a.guidance_scales = (have & 2) ? A_gs.ptr() : nullptr;
  a.temperatures = (have & 1) ? A_temps.ptr() : nullptr;
  a.top_ks = (have & 4) ? A_tks.ptr() : nullptr;
  a.top_ps = (have & 8) ? A_tps.ptr() : nullptr;
  a.min_ps = (have & 16) ? A_mps.ptr() : nullptr;
  a.seeds = (have & 32) ? A_seeds.ptr() : nullptr;
  a.steps = (have & 64) ? A_steps.ptr() : nullptr;
  a.tokens = want[0] ? (int32_t*)o_tok.data() : nullptr;
  a.logprobs = want[1] ? (float*)o_lp.data() : nullptr;
  a.argmax = want[2] ? (int32_t*)o_am.data() : nullptr;
  a.confidence = want[3] ? (float*)o_conf.data() : nullptr;
  a.margin = want[4] ? (float*)o_mar.data() : nullptr;
  a.entropy = want[5] ? (float*)o_ent.data() : nullptr;
  a.probs = want[6] ? (void*)o_probs.data() : nullptr;
  a.probs_dtype = probs_dtype_arg;
  a.probs_row_stride = probs_stride;
  a.request_status = want[7] ? (int32_t*)o_status.data() : nullptr;
  a.struct_size = struct_size;

  // Debug mode: a per-request value out of range is an error naming the request.
  auto bad_T = [](float t) { return std::isnan(t) || t < 0.f || std::isinf(t); };
  auto bad_g = [](float g) { return !std::isfinite(g); };
  auto bad_mp = [](float p) { return std::isnan(p) || p < 0.f; };
  bool any_bad_array = false;
  if (oracle == MUST_OK && num_rows >= 1) {
    for (int32_t r = 0; r < num_req; ++r) {
      if ((have & 1) && bad_T(A_temps.at(r))) any_bad_array = true;
      if ((have & 2) && bad_g(A_gs.at(r))) any_bad_array = true;
      if ((have & 4) && A_tks.at(r) < 0) any_bad_array = true;
      if ((have & 8) && std::isnan(A_tps.at(r))) any_bad_array = true;
      if ((have & 16) && bad_mp(A_mps.at(r))) any_bad_array = true;
    }
  }

  // Inputs must not change.
  std::vector<unsigned char> logits_copy(logits.mem.data(), logits.mem.data() + logits.mem.n);

  const dds_status st =
      dds_sample(sampler_null ? nullptr : sg.s, args_null ? nullptr : &a, nullptr);

  FUZZ_CHECK(st != DDS_ERR_BUSY, "single-threaded call returned DDS_ERR_BUSY");
  FUZZ_CHECK(logits.mem.n == 0 ||
                 std::memcmp(logits_copy.data(), logits.mem.data(), logits.mem.n) == 0,
             "dds_sample modified its logits input");
  Buf* all_out[8] = {&o_tok, &o_lp, &o_am, &o_conf, &o_mar, &o_ent, &o_probs, &o_status};
  auto untouched = [&]() {
    for (int b = 0; b < 8; ++b)
      if (want[b] && !all_out[b]->all_poison(b == 6 ? psz : 4)) return false;
    return true;
  };

  if (oracle == MUST_FAIL) {
    FUZZ_CHECK(st != DDS_OK, "a call breaking the rule on `%s` returned DDS_OK", mut.name);
    FUZZ_CHECK(std::strstr(dds_last_error(), mut.name) != nullptr,
               "the error for a broken `%s` does not name it", mut.name);
    if (mut.code != DDS_OK)
      FUZZ_CHECK(st == mut.code, "broken `%s`: got %s", mut.name, dds_status_string(st));
  }
  if (oracle == MUST_FAIL) count(C_RULE_BREAK);
  if (st != DDS_OK) {
    count(C_ERROR);
    check_error_message(st);
    FUZZ_CHECK(untouched(), "%s returned but an output was written", dds_status_string(st));
    if (oracle == MUST_OK) {
      if (debug && any_bad_array) {
        FUZZ_CHECK(st == DDS_ERR_INVALID_VALUE, "debug mode: got %s", dds_status_string(st));
        FUZZ_CHECK(std::strstr(dds_last_error(), "request") != nullptr,
                   "debug-mode error does not name the request");
      } else if (debug && st == DDS_ERR_INVALID_VALUE && has_uoffs) {
        // The debug check of uncond rows also looks at requests with g = 0 (stricter than the
        // flag): allowed.
      } else {
        FUZZ_FAIL("a valid call failed with %s", dds_status_string(st));
      }
    }
    return 0;
  }
  if (oracle == MUST_OK && debug && any_bad_array)
    FUZZ_FAIL("debug mode accepted an out-of-range per-request value");
  if (num_rows == 0) {
    FUZZ_CHECK(untouched(), "num_rows = 0 is a no-op, but an output was written");
    return 0;
  }

  // ---- DDS_OK: the contract of every output ------------------------------------------------
  count(C_OK);
  // The call was accepted, so the layout must be valid.
  FUZZ_CHECK(num_rows >= 1 && num_rows <= max_rows && num_req >= 1 && num_req <= max_req,
             "accepted num_rows %d num_requests %d", num_rows, num_req);
  FUZZ_CHECK(dtype_arg >= 0 && dtype_arg <= 2, "accepted dtype %d", dtype_arg);
  std::vector<int32_t> ro((size_t)num_req + 1);
  for (int32_t r = 0; r <= num_req; ++r) {
    if (has_offsets) {
      FUZZ_CHECK((size_t)r < A_offs.n, "accepted row_offsets shorter than num_requests + 1");
      ro[r] = A_offs.at(r);
    } else {
      ro[r] = r;
    }
  }
  bool offs_valid = ro[0] == 0 && ro[num_req] == num_rows;
  for (int32_t r = 0; r < num_req; ++r) offs_valid = offs_valid && ro[r] <= ro[r + 1];
  if (!offs_valid) {
    // Device-resident offsets are not host errors (docs/sampling.md §1): outside debug mode the
    // call succeeds, flags at least one request DDS_REQ_BAD_ROW_OFFSETS and stays in bounds
    // (ASan); debug mode returns DDS_ERR_INVALID_VALUE instead.
    FUZZ_CHECK(!debug, "debug mode accepted row_offsets %d..%d", ro[0], ro[num_req]);
    if (want[7]) {
      bool flagged = false;
      for (int32_t r = 0; r < num_req; ++r) flagged = flagged || (o_status.i32(r) & DDS_REQ_BAD_ROW_OFFSETS);
      FUZZ_CHECK(flagged, "invalid row_offsets %d..%d accepted with no request flagged", ro[0], ro[num_req]);
    }
    return 0;
  }
  FUZZ_CHECK(!has_uncond || (un_rows >= 0 && (has_uoffs || un_rows >= num_rows)),
             "accepted uncond_num_rows %d", un_rows);

  const int64_t rs = row_stride == 0 ? V : row_stride;
  const int64_t urs = urow_stride == 0 ? V : urow_stride;
  std::vector<float> l(V), x(V);
  std::vector<char> k0(V);
  std::vector<int32_t> order;
  for (int32_t r = 0; r < num_req; ++r) {
    const int32_t nr = ro[r + 1] - ro[r];
    // §1 sanitisation.
    int32_t flags = 0;
    float T = (have & 1) ? A_temps.at(r) : a.temperature;
    if (bad_T(T)) { T = 1.f; flags |= DDS_REQ_BAD_TEMPERATURE; }
    const float invT = T == 0.f ? kInf : 1.0f / T;
    const bool greedy = T == 0.f || std::isinf(invT);
    float g = (have & 2) ? A_gs.at(r) : a.guidance_scale;
    if (bad_g(g)) { g = 0.f; flags |= DDS_REQ_BAD_GUIDANCE; }
    bool guided = false;
    int64_t ufirst = 0;
    if (has_uncond && g != 0.f) {
      const int64_t first = has_uoffs ? (int64_t)A_uoffs.at(r) : ro[r];
      if (!has_uoffs || first >= 0) {
        if (first < 0 || first + nr > un_rows) flags |= DDS_REQ_BAD_UNCOND_ROWS;
        else { guided = true; ufirst = first; }
      }
    }
    int32_t k = (have & 4) ? A_tks.at(r) : a.top_k;
    if (k < 0) { k = 0; flags |= DDS_REQ_BAD_TOP_K; }
    float p = (have & 8) ? A_tps.at(r) : a.top_p;
    if (std::isnan(p)) { p = 1.f; flags |= DDS_REQ_BAD_TOP_P; }
    float mp = (have & 16) ? A_mps.at(r) : a.min_p;
    if (bad_mp(mp)) { mp = 0.f; flags |= DDS_REQ_BAD_MIN_P; }
    if (mp > 1.f) mp = 1.f;

    for (int32_t i = ro[r]; i < ro[r + 1]; ++i) {
      const int32_t j = i - ro[r];
      // §2 per element.
      int32_t n0 = 0, amax = -1;
      for (int32_t t = 0; t < V; ++t) {
        const float c = load_elem(logits, dtype, (int64_t)i * rs + t);
        float v = c;
        if (guided) {
          const float u = load_elem(uncond, dtype, (ufirst + j) * urs + t);
          v = (c == -kInf || u == -kInf) ? -kInf : std::fma(g, c - u, c);
        }
        if (t == a.banned_token || std::isnan(v)) v = -kInf;
        if (v == kInf) v = FLT_MAX;
        l[t] = v;
        k0[t] = v > -kInf;
        if (k0[t]) {
          ++n0;
          if (amax < 0 || v > l[amax]) amax = t;
        }
      }
      const int32_t tok = want[0] ? o_tok.i32(i) : -1;
      count(C_OK_ROWS);
      if (guided) count(C_GUIDED);
      if (n0 == 0) count(C_EMPTY);
      else if (greedy) count(C_GREEDY);
      else if ((k > 0 && k < n0) || p < 1.f || mp > 0.f) count(C_FILTERED);
      auto f_at = [&](const Buf& b) { return b.f32(i); };
      for (int b = 0; b < 6; ++b)
        if (want[b]) FUZZ_CHECK(!all_out[b]->is_poison32(i), "output %d of row %d not written", b, i);
      if (want[6]) {
        for (int64_t c = 0; c < p_eff && (i + 1 < num_rows || c < V); ++c) {
          const bool poisoned = psz == 2 ? o_probs.is_poison16(i * p_eff + c) : o_probs.is_poison32(i * p_eff + c);
          if (c < V) FUZZ_CHECK(!poisoned, "probs[%d][%lld] not written", i, (long long)c);
          else FUZZ_CHECK(poisoned, "probs padding [%d][%lld] written", i, (long long)c);
        }
      }
      auto prob = [&](int32_t t) -> float {
        const int64_t e = (int64_t)i * p_eff + t;
        if (probs_dtype == DDS_DTYPE_F32) return o_probs.f32(e);
        const uint16_t h = o_probs.u16(e);
        return probs_dtype == DDS_DTYPE_BF16 ? dds::bf16_to_f32(h) : dds::f16_to_f32(h);
      };
      if (n0 == 0) {
        flags |= DDS_REQ_EMPTY_ROW;
        if (want[0]) FUZZ_CHECK(tok == 0, "empty row %d: token %d", i, tok);
        if (want[2]) FUZZ_CHECK(o_am.i32(i) == 0, "empty row %d: argmax %d", i, o_am.i32(i));
        if (want[1]) FUZZ_CHECK(f_at(o_lp) == -kInf, "empty row %d: logprob %g", i, f_at(o_lp));
        if (want[3]) FUZZ_CHECK(f_at(o_conf) == 0.f, "empty row: confidence");
        if (want[4]) FUZZ_CHECK(f_at(o_mar) == 0.f, "empty row: margin");
        if (want[5]) FUZZ_CHECK(f_at(o_ent) == 0.f, "empty row: entropy");
        if (want[6])
          for (int32_t t = 0; t < V; ++t) FUZZ_CHECK(prob(t) == 0.f, "empty row: probs[%d]", t);
        continue;
      }
      if (want[2]) FUZZ_CHECK(o_am.i32(i) == amax, "row %d: argmax %d, expected %d", i, o_am.i32(i), amax);
      if (want[0]) {
        FUZZ_CHECK(tok >= 0 && tok < V, "row %d: token %d out of [0, %d)", i, tok, V);
        FUZZ_CHECK(k0[tok], "row %d: token %d is -inf / NaN / banned", i, tok);
      }
      double m = -INFINITY;
      if (!greedy) {
        for (int32_t t = 0; t < V; ++t) {
          float v = l[t] * invT;
          if (v == kInf) v = FLT_MAX;
          else if (v == -kInf && k0[t]) v = -FLT_MAX;
          x[t] = v;
          if (k0[t]) m = std::max(m, (double)v);
        }
      }
      if (want[0] && greedy) FUZZ_CHECK(tok == amax, "greedy row %d: token %d != argmax %d", i, tok, amax);
      if (want[0] && !greedy) {
        // §3: the token survives top-k, top-p and min-p.
        order.clear();
        for (int32_t t = 0; t < V; ++t)
          if (k0[t]) order.push_back(t);
        std::sort(order.begin(), order.end(), [&](int32_t s, int32_t t) {
          return x[s] > x[t] || (x[s] == x[t] && s < t);
        });
        const size_t rank = std::find(order.begin(), order.end(), tok) - order.begin();
        size_t n1 = order.size();
        if (k > 0 && k < n0) {
          FUZZ_CHECK(rank < (size_t)k, "row %d: token rank %zu, top_k %d", i, rank, k);
          n1 = k;
        }
        if (p < 1.f) {
          double Z1 = 0, before = 0;
          for (size_t e = 0; e < n1; ++e) {
            const double w = std::exp((double)x[order[e]] - m);
            Z1 += w;
            if (e < rank) before += w;
          }
          const double target = (double)p * Z1;
          FUZZ_CHECK(rank == 0 || before < target + 1e-9 * std::fabs(target),
                     "row %d: token rank %zu outside the top-p %g nucleus", i, rank, (double)p);
        }
        if (mp > 0.f)
          FUZZ_CHECK(std::exp((double)x[tok] - m) >= (double)mp * (1 - 1e-12),
                     "row %d: token below min_p %g", i, (double)mp);
      }
      // §5 statistics.
      const bool guided_stats = a.stats == DDS_STATS_GUIDED;
      if (!guided_stats && greedy) {
        if (want[1]) FUZZ_CHECK(f_at(o_lp) == 0.f, "greedy logprob %g", f_at(o_lp));
        if (want[3]) FUZZ_CHECK(f_at(o_conf) == 1.f, "greedy confidence %g", f_at(o_conf));
        if (want[4]) FUZZ_CHECK(f_at(o_mar) == 1.f, "greedy margin %g", f_at(o_mar));
        if (want[5]) FUZZ_CHECK(f_at(o_ent) == 0.f, "greedy entropy %g", f_at(o_ent));
        if (want[6] && want[0])
          for (int32_t t = 0; t < V; ++t)
            FUZZ_CHECK(prob(t) == (t == tok ? 1.f : 0.f), "greedy probs[%d] = %g", t, prob(t));
      } else {
        if (want[1]) {
          const float lp = f_at(o_lp);
          FUZZ_CHECK(!std::isnan(lp) && lp <= 1e-6f, "row %d: logprob %g", i, lp);
          if (!guided_stats) FUZZ_CHECK(std::isfinite(lp), "row %d: processed logprob %g", i, lp);
        }
        if (want[3]) FUZZ_CHECK(f_at(o_conf) > 0.f && f_at(o_conf) <= 1.f, "row %d: confidence %g", i, f_at(o_conf));
        if (want[4]) FUZZ_CHECK(f_at(o_mar) >= 0.f && f_at(o_mar) <= 1.f, "row %d: margin %g", i, f_at(o_mar));
        if (want[5]) FUZZ_CHECK(std::isfinite(f_at(o_ent)) && f_at(o_ent) >= 0.f, "row %d: entropy %g", i, f_at(o_ent));
        if (want[6]) {
          double sum = 0;
          for (int32_t t = 0; t < V; ++t) {
            const float pt = prob(t);
            FUZZ_CHECK(pt >= 0.f && pt <= 1.f, "row %d: probs[%d] = %g", i, t, pt);
            if (!k0[t]) FUZZ_CHECK(pt == 0.f, "row %d: probs[%d] = %g on a -inf column", i, t, pt);
            sum += pt;
          }
          FUZZ_CHECK(std::fabs(sum - 1.0) < 0.02, "row %d: probs sum to %g", i, sum);
        }
      }
    }
    if (want[7])
      FUZZ_CHECK(o_status.i32(r) == flags, "request %d: request_status 0x%x, expected 0x%x", r,
                 o_status.i32(r), flags);
  }
  return 0;
}
