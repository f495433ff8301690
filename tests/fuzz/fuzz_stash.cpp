// libFuzzer target: dds_stash_logprobs on the CPU backend.
//
// The input draws a sampler and a dds_stash_args: rows, requests, row offsets, dtype, stride,
// keep flags, slots (in and out of range), num_valid (negative, large), temperatures (hostile),
// committed tokens and token ids (in and out of [0, V)), num_token_ids, num_top, logits mode,
// output shape and which outputs are given, then at most one deliberate rule break or a chaos
// rewrite of the layout. Buffers are exactly sized from the final arguments.
//
// Oracle: a mutation fails naming the field; an unmutated call succeeds (debug mode: fails with
// DDS_ERR_INVALID_VALUE naming the request when a per-request value is out of range). On DDS_OK
// exactly the entries of kept requests' first num_valid rows (docs/sampling.md §7) are written
// and every other element keeps its poison; entry 0 is the committed token or the argmax; the
// top-n entries are the top tokens in (value desc, id asc) order; ranks are 1 + the number of
// strictly larger values (0 for padding and out-of-range ids); values are exact in logits mode
// and consistent log-probabilities otherwise; request_status holds the documented flags.
#include <algorithm>

#include "dtype.h"
#include "fuzz_common.h"

using namespace fz;

namespace {

enum Oracle { MUST_OK, MUST_FAIL, ANY };

size_t dsize(int32_t dtype) { return dtype == DDS_DTYPE_F32 ? 4 : 2; }

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

int32_t pick_token(FuzzedDataProvider& in, int32_t V) {
  switch (in.ConsumeIntegral<uint8_t>() % 8) {
    case 0: return -1;
    case 1: return V;
    case 2: return INT32_MIN;
    case 3: return 0;
    case 4: return V - 1;
    default: return in.ConsumeIntegralInRange<int32_t>(0, V - 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  set_fallback_seed(data, size);

  const uint8_t vsel = in.ConsumeIntegral<uint8_t>();
  const int32_t V = vsel < 248 ? 1 + vsel % 40 : 1020 + vsel % 12;
  const int32_t max_rows = in.ConsumeIntegralInRange<int32_t>(1, 8);
  const int32_t max_req = in.ConsumeIntegralInRange<int32_t>(1, 8);
  const int32_t max_w = in.ConsumeIntegralInRange<int32_t>(0, 24);
  const bool debug = (in.ConsumeIntegral<uint8_t>() & 7) == 0;
  dds_sampler_config cfg;
  if (dds_sampler_config_init(&cfg, sizeof cfg) != DDS_OK) FUZZ_FAIL("config_init");
  cfg.vocab_size = V;
  cfg.max_rows = max_rows;
  cfg.max_requests = max_req;
  cfg.max_stash_width = max_w;
  cfg.flags = debug ? DDS_FLAG_DEBUG_CHECKS : 0u;
  SamplerGuard sg;
  if (dds_create(&cfg, &sg.s) != DDS_OK) FUZZ_FAIL("dds_create of a valid config failed");

  dds_stash_args a;
  if (dds_stash_args_init(&a, sizeof a) != DDS_OK) FUZZ_FAIL("stash_args_init");
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
  int32_t dtype = in.ConsumeIntegralInRange<int32_t>(0, 2);
  int64_t row_stride = 0;
  switch (in.ConsumeIntegral<uint8_t>() % 4) {
    case 0: row_stride = 0; break;
    case 1: row_stride = V; break;
    case 2: row_stride = V + in.ConsumeIntegralInRange<int32_t>(1, 5); break;
    default: row_stride = num_rows <= 1 ? INT64_MAX / 4 : 0;
  }
  int32_t num_top = in.ConsumeIntegralInRange<int32_t>(0, max_w);
  int32_t num_slots = in.ConsumeIntegralInRange<int32_t>(1, 5);
  int32_t rows_per_slot = in.ConsumeIntegralInRange<int32_t>(1, 5);
  a.logits_mode = in.ConsumeBool() ? 1 : 0;
  a.temperature = in.ConsumeBool() ? 1.f : (in.ConsumeBool() ? 0.f : 0.5f);
  const uint8_t have = in.ConsumeIntegral<uint8_t>();
  // bits: keep slots num_valid temperatures committed token_ids num_token_ids
  std::vector<uint8_t> keep;
  std::vector<int32_t> slots, nvalid, committed, tids, ntids;
  std::vector<float> temps;
  for (int32_t r = 0; r < num_req; ++r) {
    if (have & 1) keep.push_back(in.ConsumeIntegral<uint8_t>() % 3 == 0 ? 0 : in.ConsumeIntegral<uint8_t>() | 1);
    if (have & 2) {
      const uint8_t c = in.ConsumeIntegral<uint8_t>() % 6;
      slots.push_back(c == 0 ? -1 : c == 1 ? num_slots : c == 2 ? INT32_MIN
                                                    : in.ConsumeIntegralInRange<int32_t>(0, num_slots - 1));
    }
    if (have & 4) {
      const uint8_t c = in.ConsumeIntegral<uint8_t>() % 5;
      nvalid.push_back(c == 0 ? -3 : c == 1 ? INT32_MAX : c == 2 ? INT32_MIN
                                                        : in.ConsumeIntegralInRange<int32_t>(0, 6));
    }
    if (have & 8) temps.push_back(pick_temperature(in));
    if (have & 32)
      for (int32_t e = 0; e < num_top; ++e) tids.push_back(pick_token(in, V));
    if ((have & 32) && (have & 64)) {
      const uint8_t c = in.ConsumeIntegral<uint8_t>() % 6;
      ntids.push_back(c == 0 ? -1 : c == 1 ? num_top + 1 : in.ConsumeIntegralInRange<int32_t>(0, num_top));
    }
  }
  if (have & 16)
    for (int32_t i = 0; i < num_rows; ++i) committed.push_back(pick_token(in, V));
  uint8_t outs = in.ConsumeIntegral<uint8_t>();  // bits: token_ids logprobs ranks status
  if ((outs & 7) == 0) outs |= 1;
  bool logits_null = false, args_null = false, sampler_null = false;
  int32_t dtype_arg = dtype;
  size_t struct_size = sizeof a;
  int misalign_which = -1;
  bool tids_null_with_ntids = false;

  Oracle oracle = MUST_OK;
  const char* mut_name = nullptr;
  dds_status mut_code = DDS_OK;
  auto must_fail = [&](const char* name, dds_status code = DDS_OK) {
    oracle = MUST_FAIL;
    mut_name = name;
    mut_code = code;
  };
  const uint8_t msel = in.ConsumeIntegral<uint8_t>();
  const int32_t mk = msel < 64 ? 0 : 1 + msel % 27;
  if (num_rows >= 1) switch (mk) {
      case 0: break;
      case 1: num_rows = -in.ConsumeIntegralInRange<int32_t>(1, 3); must_fail("num_rows"); break;
      case 2: num_rows = max_rows + in.ConsumeIntegralInRange<int32_t>(1, 3); must_fail("num_rows", DDS_ERR_CAPACITY); break;
      case 3: num_req = -in.ConsumeIntegralInRange<int32_t>(0, 2); must_fail("num_requests"); break;
      case 4: if (max_req < 8) { num_req = max_req + 1; must_fail("num_requests", DDS_ERR_CAPACITY); } break;
      case 5: if (has_offsets && debug) { offs[0] = -1; must_fail("row_offsets", DDS_ERR_INVALID_VALUE); } break;
      case 6: if (has_offsets && debug) { offs[num_req] = num_rows + 1; must_fail("row_offsets", DDS_ERR_INVALID_VALUE); } break;
      case 7: logits_null = true; must_fail("logits", DDS_ERR_NULL_POINTER); break;
      case 8: dtype_arg = in.ConsumeBool() ? 3 : INT32_MIN; must_fail("dtype"); break;
      case 9: row_stride = V > 1 ? V - 1 : -1; must_fail("row_stride"); break;
      case 10: a.temperature = in.ConsumeBool() ? kNaN : -kInf; must_fail("temperature"); break;
      case 11: a.logits_mode = in.ConsumeBool() ? 2 : -1; must_fail("logits_mode"); break;
      case 12: num_slots = -in.ConsumeIntegralInRange<int32_t>(0, 2); must_fail("num_slots"); break;
      case 13: rows_per_slot = -in.ConsumeIntegralInRange<int32_t>(0, 2); must_fail("rows_per_slot"); break;
      case 14: num_slots = 1 << 16; rows_per_slot = 1 << 16; must_fail("num_slots"); break;
      case 15: num_top = -1; must_fail("num_top"); break;
      case 16: num_top = max_w + 1; must_fail("num_top", DDS_ERR_CAPACITY); break;
      case 17: tids_null_with_ntids = true; must_fail("num_token_ids"); break;
      case 18: outs &= 8; must_fail("output", DDS_ERR_NULL_POINTER); break;
      case 19: misalign_which = in.ConsumeIntegralInRange<int32_t>(0, 11); break;
      case 20: struct_size = in.ConsumeIntegralInRange<size_t>(0, offsetof(dds_stash_args, allowed_token_masks) - 1); must_fail("struct_size", DDS_ERR_STRUCT_SIZE); break;
      case 21: sampler_null = true; must_fail("sampler", DDS_ERR_NULL_POINTER); break;
      case 22: args_null = true; must_fail("args", DDS_ERR_NULL_POINTER); break;
      case 23: if (num_req != num_rows) { has_offsets = false; must_fail("row_offsets"); } break;
      default: {
        oracle = ANY;
        num_rows = in.ConsumeIntegralInRange<int32_t>(-2, max_rows + 2);
        num_req = in.ConsumeIntegralInRange<int32_t>(-2, max_req + 2);
        num_top = in.ConsumeIntegralInRange<int32_t>(-2, max_w + 2);
        if (in.ConsumeBool()) {
          has_offsets = true;
          offs.assign((size_t)std::max(num_req + 1, 0), 0);
          for (auto& o : offs) o = in.ConsumeIntegralInRange<int32_t>(-1, std::max(num_rows, 0) + 1);
          if (in.ConsumeBool()) std::sort(offs.begin(), offs.end());
        } else {
          offs.resize((size_t)std::max(num_req + 1, 0), num_rows);
        }
        const size_t nr = (size_t)std::max(num_req, 0);
        if (have & 1) keep.resize(nr, 1);
        if (have & 2) slots.resize(nr, 0);
        if (have & 4) nvalid.resize(nr, 0);
        if (have & 8) temps.resize(nr, 1.f);
        if (have & 32) tids.resize(nr * (size_t)std::max(num_top, 0), 0);
        if ((have & 32) && (have & 64)) ntids.resize(nr, 0);
        if (have & 16) committed.resize((size_t)std::max(num_rows, 0), 0);
        break;
      }
    }
  if (num_rows > 1 && row_stride > V + 64) row_stride = 0;

  auto mis = [&](int idx) -> size_t { return misalign_which == idx ? 1 : 0; };
  static const char* const kNames[12] = {"row_offsets", "logits", "slots", "num_valid",
                                         "temperatures", "committed_tokens", "token_ids",
                                         "num_token_ids", "out_token_ids", "out_logprobs",
                                         "out_ranks", "request_status"};
  const int32_t rows_alloc = std::max(num_rows, 0);
  const int32_t req_alloc = std::max(num_req, 0);
  const int64_t rs = row_stride <= 0 ? V : std::max<int64_t>(row_stride, V);
  Arr<unsigned char> logits;
  {
    const size_t n = rows_alloc == 0 ? 0 : (size_t)((rows_alloc - 1) * rs + V);
    std::vector<unsigned char> v(n * dsize(dtype));
    for (size_t e = 0; e < n; ++e) {
      if (dtype == DDS_DTYPE_F32) {
        const float f = pick_logit(in);
        std::memcpy(&v[4 * e], &f, 4);
      } else {
        const uint16_t h = in.ConsumeBool()
                               ? (dtype == DDS_DTYPE_BF16 ? dds::f32_to_bf16(pick_logit(in))
                                                          : dds::f32_to_f16(pick_logit(in)))
                               : in.ConsumeIntegral<uint16_t>();
        std::memcpy(&v[2 * e], &h, 2);
      }
    }
    logits.set(v, mis(1));
  }
  Arr<int32_t> A_offs, A_slots, A_nvalid, A_comm, A_tids, A_ntids;
  Arr<uint8_t> A_keep;
  Arr<float> A_temps;
  if (has_offsets) A_offs.set(offs, mis(0));
  if (have & 1) { keep.resize(req_alloc, 1); A_keep.set(keep); }
  if (have & 2) { slots.resize(req_alloc, 0); A_slots.set(slots, mis(2)); }
  if (have & 4) { nvalid.resize(req_alloc, 0); A_nvalid.set(nvalid, mis(3)); }
  if (have & 8) { temps.resize(req_alloc, 1.f); A_temps.set(temps, mis(4)); }
  if (have & 16) { committed.resize(rows_alloc, 0); A_comm.set(committed, mis(5)); }
  if (have & 32) { tids.resize((size_t)req_alloc * std::max(num_top, 0), 0); A_tids.set(tids, mis(6)); }
  const bool has_ntids = ((have & 32) && (have & 64)) || tids_null_with_ntids;
  if (has_ntids) { ntids.resize(req_alloc, 0); A_ntids.set(ntids, mis(7)); }
  const int32_t E = std::max(num_top, 0) + 1;
  const bool huge_out = (int64_t)num_slots * rows_per_slot * E > 4096;
  const size_t out_elems =
      huge_out ? 16 : (size_t)std::max(num_slots, 0) * std::max(rows_per_slot, 0) * E;
  const bool want[4] = {(outs & 1) != 0, (outs & 2) != 0, (outs & 4) != 0, (outs & 8) != 0};
  Buf o_tok, o_val, o_rank, o_status;
  if (want[0]) o_tok.alloc(4 * out_elems, mis(8), 4);
  if (want[1]) o_val.alloc(4 * out_elems, mis(9), 4);
  if (want[2]) o_rank.alloc(4 * out_elems, mis(10), 4);
  if (want[3]) o_status.alloc(4 * (size_t)req_alloc, mis(11), 4);
  if (misalign_which >= 0) {
    bool present = false;
    switch (misalign_which) {
      case 0: present = has_offsets; break;
      case 1: present = true; break;
      case 2: present = (have & 2) != 0; break;
      case 3: present = (have & 4) != 0; break;
      case 4: present = (have & 8) != 0; break;
      case 5: present = (have & 16) != 0; break;
      case 6: present = (have & 32) != 0; break;
      case 7: present = has_ntids; break;
      default: present = want[misalign_which - 8]; break;
    }
    if (present) must_fail(kNames[misalign_which]);
  }

  a.num_rows = num_rows;
  a.num_requests = num_req;
  a.row_offsets = has_offsets ? A_offs.ptr() : nullptr;
  a.logits = logits_null ? nullptr : logits.ptr();
  a.dtype = dtype_arg;
  a.row_stride = row_stride;
  a.keep = (have & 1) ? A_keep.ptr() : nullptr;
  a.slots = (have & 2) ? A_slots.ptr() : nullptr;
  a.num_valid = (have & 4) ? A_nvalid.ptr() : nullptr;
  a.temperatures = (have & 8) ? A_temps.ptr() : nullptr;
  a.committed_tokens = (have & 16) ? A_comm.ptr() : nullptr;
  a.token_ids = ((have & 32) && !tids_null_with_ntids) ? A_tids.ptr() : nullptr;
  a.num_token_ids = has_ntids ? A_ntids.ptr() : nullptr;
  a.num_top = num_top;
  a.num_slots = num_slots;
  a.rows_per_slot = rows_per_slot;
  a.out_token_ids = want[0] ? (int32_t*)o_tok.data() : nullptr;
  a.out_logprobs = want[1] ? (float*)o_val.data() : nullptr;
  a.out_ranks = want[2] ? (int32_t*)o_rank.data() : nullptr;
  a.request_status = want[3] ? (int32_t*)o_status.data() : nullptr;
  a.struct_size = struct_size;

  auto bad_T = [](float t) { return std::isnan(t) || t < 0.f || std::isinf(t); };
  bool debug_bad = false;
  if (oracle == MUST_OK && num_rows >= 1)
    for (int32_t r = 0; r < num_req; ++r) {
      if ((have & 8) && bad_T(A_temps.at(r))) debug_bad = true;
      if ((have & 2) && (A_slots.at(r) < 0 || A_slots.at(r) >= num_slots)) debug_bad = true;
      if (has_ntids && (A_ntids.at(r) < 0 || A_ntids.at(r) > num_top)) debug_bad = true;
      if ((have & 32) && num_top > 0) {  // input ids outside [0, V) (DDS_REQ_BAD_TOKEN_ID)
        const int32_t k = has_ntids ? std::max(0, std::min(A_ntids.at(r), num_top)) : num_top;
        for (int32_t e = 0; e < k; ++e) {
          const int32_t t = A_tids.at((size_t)r * num_top + e);
          if (t < 0 || t >= V) debug_bad = true;
        }
      }
    }
  if (oracle == MUST_OK && num_rows >= 1 && (have & 16))
    for (int32_t i = 0; i < num_rows; ++i)
      if (A_comm.at(i) < 0 || A_comm.at(i) >= V) debug_bad = true;

  const dds_status st =
      dds_stash_logprobs(sampler_null ? nullptr : sg.s, args_null ? nullptr : &a, nullptr);
  FUZZ_CHECK(st != DDS_ERR_BUSY, "single-threaded call returned DDS_ERR_BUSY");
  Buf* all_out[4] = {&o_tok, &o_val, &o_rank, &o_status};
  auto untouched = [&]() {
    for (int b = 0; b < 4; ++b)
      if (want[b] && !all_out[b]->all_poison(4)) return false;
    return true;
  };
  if (oracle == MUST_FAIL) {
    FUZZ_CHECK(st != DDS_OK, "a call breaking the rule on `%s` returned DDS_OK", mut_name);
    FUZZ_CHECK(std::strstr(dds_last_error(), mut_name) != nullptr,
               "the error for a broken `%s` does not name it", mut_name);
    if (mut_code != DDS_OK)
      FUZZ_CHECK(st == mut_code, "broken `%s`: got %s", mut_name, dds_status_string(st));
  }
  if (oracle == MUST_FAIL) count(C_RULE_BREAK);
  if (st != DDS_OK) {
    count(C_ERROR);
    check_error_message(st);
    FUZZ_CHECK(untouched(), "%s returned but an output was written", dds_status_string(st));
    if (oracle == MUST_OK) {
      FUZZ_CHECK(debug && debug_bad, "a valid call failed with %s", dds_status_string(st));
      // The message names the request, or the row of a committed token.
      FUZZ_CHECK(st == DDS_ERR_INVALID_VALUE && (std::strstr(dds_last_error(), "request") ||
                                                 std::strstr(dds_last_error(), "committed_tokens")),
                 "debug mode: %s", dds_status_string(st));
    }
    return 0;
  }
  if (oracle == MUST_OK && debug && debug_bad)
    FUZZ_FAIL("debug mode accepted an out-of-range per-request value");
  if (num_rows == 0) {
    FUZZ_CHECK(untouched(), "num_rows = 0 is a no-op, but an output was written");
    return 0;
  }

  // ---- DDS_OK ----------------------------------------------------------------------------
  count(C_OK);
  FUZZ_CHECK(num_rows <= max_rows && num_req >= 1 && num_req <= max_req && num_top >= 0 &&
                 num_top <= max_w && num_slots >= 1 && rows_per_slot >= 1 && !huge_out,
             "accepted a bad layout");
  std::vector<int32_t> ro((size_t)num_req + 1);
  for (int32_t r = 0; r <= num_req; ++r) {
    if (has_offsets) {
      FUZZ_CHECK((size_t)r < A_offs.n, "accepted short row_offsets");
      ro[r] = A_offs.at(r);
    } else {
      ro[r] = r;
    }
  }
  bool offs_valid = ro[0] == 0 && ro[num_req] == num_rows;
  for (int32_t r = 0; r < num_req; ++r) offs_valid = offs_valid && ro[r] <= ro[r + 1];
  if (!offs_valid) {
    // Device-resident offsets are not host errors (docs/sampling.md §1): outside debug mode the
    // call succeeds and flags at least one request DDS_REQ_BAD_ROW_OFFSETS; ASan checks bounds.
    FUZZ_CHECK(!debug, "debug mode accepted invalid row_offsets");
    if (want[3])  // every kept request whose own offsets break the rule is flagged
      for (int32_t r = 0; r < num_req; ++r) {
        const int32_t b = ro[r], e = ro[r + 1];
        const bool good = b >= 0 && b <= e && e <= num_rows && (r != 0 || b == 0) &&
                          (r != num_req - 1 || e == num_rows);
        const bool kept = !(have & 1) || A_keep.at(r) != 0;
        if (kept && !good)
          FUZZ_CHECK(o_status.i32(r) & DDS_REQ_BAD_ROW_OFFSETS, "request %d: bad offsets %d..%d not flagged", r, b, e);
      }
    return 0;
  }

  const int32_t n = num_top;
  std::vector<char> written(out_elems, 0);
  std::vector<float> v(V);
  std::vector<int32_t> idx;
  // Expected entries, per element (later requests win where two share a slot).
  std::vector<int32_t> e_tok(out_elems), e_rank(out_elems);
  std::vector<float> e_val(out_elems);
  std::vector<char> e_val_exact(out_elems);
  for (int32_t r = 0; r < num_req; ++r) {
    int32_t flags = 0;
    const bool kept = !(have & 1) || A_keep.at(r) != 0;
    const int32_t slot = (have & 2) ? A_slots.at(r) : r;
    const int32_t nr = ro[r + 1] - ro[r];
    if (kept && (slot < 0 || slot >= num_slots)) flags = DDS_REQ_BAD_SLOT;
    float T = (have & 8) ? A_temps.at(r) : a.temperature;
    if (kept && !flags && bad_T(T)) flags |= DDS_REQ_BAD_TEMPERATURE;
    if (kept && !(flags & DDS_REQ_BAD_SLOT)) {  // input ids (docs/sampling.md §1)
      if (have & 32) {
        int32_t nid = (have & 64) ? A_ntids.at(r) : num_top;
        if (nid < 0 || nid > num_top) flags |= DDS_REQ_BAD_NUM_TOKEN_IDS;
        nid = std::max(0, std::min(nid, num_top));
        for (int32_t e = 0; e < nid; ++e) {
          const int32_t t = A_tids.at((size_t)r * num_top + e);
          if (t < 0 || t >= V) flags |= DDS_REQ_BAD_TOKEN_ID;
        }
      }
      if (have & 16) {
        int32_t cnt = (have & 4) ? A_nvalid.at(r) : nr;
        cnt = std::max(0, std::min(std::min(cnt, nr), rows_per_slot));
        for (int32_t i = ro[r]; i < ro[r] + cnt; ++i)
          if (A_comm.at(i) < 0 || A_comm.at(i) >= V) flags |= DDS_REQ_BAD_TOKEN_ID;
      }
    }
    if (want[3]) FUZZ_CHECK(o_status.i32(r) == flags, "request %d: status 0x%x, expected 0x%x", r, o_status.i32(r), flags);
    if (!kept || (flags & DDS_REQ_BAD_SLOT)) continue;
    if (bad_T(T) || T == 0.f) T = 1.f;
    float invT = 1.0f / T;
    if (std::isinf(invT)) invT = 1.f;
    int32_t nval = (have & 4) ? A_nvalid.at(r) : nr;
    nval = std::max(0, std::min(std::min(nval, nr), rows_per_slot));
    int32_t n_ids = 0;
    if (have & 32) {
      n_ids = has_ntids ? A_ntids.at(r) : n;
      n_ids = std::max(0, std::min(n_ids, n));
    }
    for (int32_t j = 0; j < nval; ++j) {
      const int32_t i = ro[r] + j;
      count(C_OK_ROWS);
      if (n_ids > 0) count(C_FILTERED);  // rows with the request's own ids
      int32_t nf = 0, amax = -1;
      for (int32_t t = 0; t < V; ++t) {
        float c = load_elem(logits, dtype, (int64_t)i * rs + t);
        if (std::isnan(c)) c = -kInf;
        if (c == kInf) c = FLT_MAX;
        float x = c * invT;
        if (x == kInf) x = FLT_MAX;
        v[t] = x;
        if (x > -kInf) {
          ++nf;
          if (amax < 0 || x > v[amax]) amax = t;
        }
      }
      // Log-probs as (v - M) - log Z (docs/sampling.md §7; M + log Z would lose log Z near
      // FLT_MAX).
      double M = 0, logS = INFINITY;
      if (nf > 0) {
        M = v[amax];
        double Z = 0;
        for (int32_t t = 0; t < V; ++t)
          if (v[t] > -kInf) Z += std::exp((double)v[t] - M);
        logS = std::log(Z);
      }
      const size_t base = ((size_t)slot * rows_per_slot + j) * E;
      auto put = [&](int32_t e, int32_t tok) {
        written[base + e] = 1;
        e_tok[base + e] = tok;
        if (tok < 0 || tok >= V) {
          e_val[base + e] = -kInf;
          e_rank[base + e] = 0;
          e_val_exact[base + e] = 1;
          return;
        }
        int32_t greater = 0;
        for (int32_t s = 0; s < V; ++s) greater += v[s] > v[tok];
        e_rank[base + e] = 1 + greater;
        e_val_exact[base + e] = a.logits_mode == 1 || v[tok] == -kInf;
        e_val[base + e] = v[tok] == -kInf ? -kInf : a.logits_mode ? v[tok] : (float)(((double)v[tok] - M) - logS);
      };
      auto pad = [&](int32_t e) {
        written[base + e] = 1;
        e_tok[base + e] = 0;
        e_val[base + e] = -kInf;
        e_rank[base + e] = 0;
        e_val_exact[base + e] = 1;
      };
      if (have & 16) put(0, A_comm.at(i));
      else if (amax >= 0) put(0, amax);
      else pad(0);
      if (n_ids > 0) {
        for (int32_t e = 1; e <= n; ++e) {
          if (e <= n_ids) put(e, A_tids.at((size_t)r * n + e - 1));
          else pad(e);
        }
      } else if (n > 0) {
        idx.clear();
        for (int32_t t = 0; t < V; ++t)
          if (v[t] > -kInf) idx.push_back(t);
        std::sort(idx.begin(), idx.end(), [&](int32_t s, int32_t t) { return v[s] > v[t] || (v[s] == v[t] && s < t); });
        for (int32_t e = 1; e <= n; ++e) {
          if (e <= (int32_t)idx.size()) put(e, idx[e - 1]);
          else pad(e);
        }
      }
    }
  }
  for (size_t q = 0; q < out_elems; ++q) {
    if (!written[q]) {
      for (int b = 0; b < 3; ++b)
        if (want[b]) FUZZ_CHECK(all_out[b]->is_poison32(q), "output %d element %zu written outside the kept rows", b, q);
      continue;
    }
    if (want[0]) FUZZ_CHECK(o_tok.i32(q) == e_tok[q], "element %zu: token %d, expected %d", q, o_tok.i32(q), e_tok[q]);
    if (want[2]) FUZZ_CHECK(o_rank.i32(q) == e_rank[q], "element %zu: rank %d, expected %d", q, o_rank.i32(q), e_rank[q]);
    if (want[1]) {
      const float got = o_val.f32(q), exp = e_val[q];
      if (e_val_exact[q]) {
        FUZZ_CHECK(got == exp, "element %zu: value %g, expected %g", q, got, exp);
      } else {
        FUZZ_CHECK(!std::isnan(got) && got <= 0.f, "element %zu: log-prob %g", q, got);
        FUZZ_CHECK(got == exp || std::fabs(got - exp) <= 1e-5f * std::max(1.f, std::fabs(exp)),
                   "element %zu: log-prob %g, expected %g", q, got, exp);
      }
    }
  }
  return 0;
}
