// The C ABI: shims (no exception crosses it), argument validation with messages that name the
// argument and the rule, normalisation, dispatch to a backend.
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "allowed.h"  // kernels/common: the allowed-token mask layout
#include "checks.h"
#include "internal.h"
#include "offsets.h"  // kernels/common: the row_offsets rule
#include "status.h"  // kernels/common: the kernels' names of the DDS_REQ_* bits

static_assert(dds::kReqBadTemperature == DDS_REQ_BAD_TEMPERATURE && dds::kReqBadGuidance == DDS_REQ_BAD_GUIDANCE &&
                  dds::kReqBadTopK == DDS_REQ_BAD_TOP_K && dds::kReqBadTopP == DDS_REQ_BAD_TOP_P &&
                  dds::kReqBadMinP == DDS_REQ_BAD_MIN_P && dds::kReqBadUncondRows == DDS_REQ_BAD_UNCOND_ROWS &&
                  dds::kReqEmptyRow == DDS_REQ_EMPTY_ROW && dds::kReqBadSlot == DDS_REQ_BAD_SLOT &&
                  dds::kReqBadPolicy == DDS_REQ_BAD_POLICY && dds::kReqBadPosition == DDS_REQ_BAD_POSITION &&
                  dds::kReqBadRowOffsets == DDS_REQ_BAD_ROW_OFFSETS &&
                  dds::kReqBadDraftCount == DDS_REQ_BAD_DRAFT_COUNT &&
                  dds::kReqBadEntropyBound == DDS_REQ_BAD_ENTROPY_BOUND &&
                  dds::kReqBadTokenId == DDS_REQ_BAD_TOKEN_ID &&
                  dds::kReqBadNumTokenIds == DDS_REQ_BAD_NUM_TOKEN_IDS &&
                  dds::kReqBadRevealParam == DDS_REQ_BAD_REVEAL_PARAM,
              "kernels/common/status.h and include/dds/dds.h disagree");

namespace dds {
namespace {
thread_local std::string g_last_error;

#define DDS_STR2(x) #x
#define DDS_STR(x) DDS_STR2(x)
const char kVersionString[] =
    DDS_STR(DDS_VERSION_MAJOR) "." DDS_STR(DDS_VERSION_MINOR) "." DDS_STR(DDS_VERSION_PATCH);

bool aligned(const void* p, size_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

template <typename T, typename Bad>
dds_status debug_check_array(Backend& be, const char* fn, const char* name, const T* arr, int32_t n,
                             dds_stream stream, Bad bad) {
  if (arr == nullptr) return DDS_OK;
  std::vector<T> h;
  dds_status st = fetch(be, arr, (size_t)n, &h, stream);
  if (st != DDS_OK) return st;
  for (int32_t r = 0; r < n; ++r) {
    const char* rule = bad(h[r]);
    if (rule)
      return fail(DDS_ERR_INVALID_VALUE, "%s: args->%s[%d] (request %d) %s", fn, name, r, r, rule);
  }
  return DDS_OK;
}

dds_status validate_sample(dds_sampler* s, dds_sample_args* a, dds_stream stream) {
  const char* fn = "dds_sample";
  const int32_t V = s->config.vocab_size;
  Backend& be = *s->backend;
  dds_status st = check_num_rows(fn, s, a->num_rows);
  if (st != DDS_OK) return st;
  if (a->num_rows == 0) return DDS_OK;
  auto full_row = [&](const char* name, int64_t* stride, int32_t rows) {
    return resolve_stride(fn, name, stride, V, rows);
  };
  if ((st = check_requests(fn, s, a->num_requests, a->num_rows, a->row_offsets)) != DDS_OK ||
      (st = check_logits(fn, a->logits, a->dtype, &a->row_stride, V, a->num_rows)) != DDS_OK ||
      (st = check_uncond(fn, a, full_row)) != DDS_OK ||
      (st = check_guidance_scale(fn, a->guidance_scale)) != DDS_OK ||
      (st = check_filters(fn, a->temperature, a->top_k, a->top_p, a->min_p)) != DDS_OK ||
      (st = check_banned_token(fn, a->banned_token, V)) != DDS_OK ||
      (st = check_stats(fn, a->stats)) != DDS_OK ||
      (st = resolve_mask_stride(be, fn, a->allowed_token_masks, &a->allowed_mask_stride, V,
                                a->num_requests)) != DDS_OK ||
      (st = check_probs(fn, a, full_row)) != DDS_OK ||
      (st = check_sample_outputs(fn, *a)) != DDS_OK ||
      (st = check_sample_ptrs(be, fn, *a)) != DDS_OK)
    return st;
  if ((st = debug_row_offsets(s, fn, a->row_offsets, a->num_requests, a->num_rows, stream)) !=
      DDS_OK)
    return st;
  if (debug_checks(s)) {
    const int32_t n = a->num_requests;
    if ((st = debug_check_array(be, fn, "temperatures", a->temperatures, n, stream,
                                bad_temperature)) != DDS_OK ||
        (st = debug_check_array(be, fn, "guidance_scales", a->guidance_scales, n, stream,
                                bad_guidance)) != DDS_OK ||
        (st = debug_check_array(be, fn, "top_ks", a->top_ks, n, stream, bad_top_k)) != DDS_OK ||
        (st = debug_check_array(be, fn, "top_ps", a->top_ps, n, stream, bad_top_p)) != DDS_OK ||
        (st = debug_check_array(be, fn, "min_ps", a->min_ps, n, stream, bad_min_p)) != DDS_OK)
      return st;
    if (a->uncond_logits && a->uncond_row_offsets) {
      std::vector<int32_t> offs, uoffs;
      if ((st = fetch(be, a->uncond_row_offsets, (size_t)n, &uoffs, stream)) != DDS_OK) return st;
      if (a->row_offsets) {
        if ((st = fetch(be, a->row_offsets, (size_t)n + 1, &offs, stream)) != DDS_OK) return st;
      } else {
        offs.resize((size_t)n + 1);
        for (int32_t r = 0; r <= n; ++r) offs[r] = r;
      }
      // Only guided requests (g != 0) use their uncond rows: the sanitising backends flag
      // DDS_REQ_BAD_UNCOND_ROWS only for those, so debug mode errors on exactly the same ones.
      std::vector<float> gs;
      if (a->guidance_scales &&
          (st = fetch(be, a->guidance_scales, (size_t)n, &gs, stream)) != DDS_OK)
        return st;
      for (int32_t r = 0; r < n; ++r) {
        if (uoffs[r] < 0) continue;
        if ((a->guidance_scales ? gs[r] : a->guidance_scale) == 0.f) continue;
        const int64_t end = (int64_t)uoffs[r] + (offs[r + 1] - offs[r]);
        if (end > a->uncond_num_rows)
          return fail(DDS_ERR_INVALID_VALUE,
                      "%s: args->uncond_row_offsets[%d] (request %d) = %d: its rows end at %lld > "
                      "uncond_num_rows (%d)",
                      fn, r, r, uoffs[r], (long long)end, a->uncond_num_rows);
      }
    }
  }
  return DDS_OK;
}

dds_status validate_stash(dds_sampler* s, dds_stash_args* a, dds_stream stream) {
  const char* fn = "dds_stash_logprobs";
  const int32_t V = s->config.vocab_size;
  Backend& be = *s->backend;
  dds_status st = check_num_rows(fn, s, a->num_rows);
  if (st != DDS_OK) return st;
  if (a->num_top < 0)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_top (%d) must be >= 0", fn, a->num_top);
  if (a->num_top > s->config.max_stash_width)
    return fail(DDS_ERR_CAPACITY,
                "%s: args->num_top (%d) exceeds the sampler's max_stash_width (%d)", fn,
                a->num_top, s->config.max_stash_width);
  if (a->num_rows == 0) return DDS_OK;
  if ((st = check_requests(fn, s, a->num_requests, a->num_rows, a->row_offsets)) != DDS_OK ||
      (st = check_logits(fn, a->logits, a->dtype, &a->row_stride, V, a->num_rows)) != DDS_OK ||
      (st = check_temperature(fn, a->temperature)) != DDS_OK)
    return st;
  if (a->logits_mode != 0 && a->logits_mode != 1)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->logits_mode (%d) must be 0 (log-probs) or 1 (tempered logits)", fn,
                a->logits_mode);
  if (a->num_slots < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_slots (%d) must be >= 1", fn,
                a->num_slots);
  if (a->rows_per_slot < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->rows_per_slot (%d) must be >= 1", fn,
                a->rows_per_slot);
  if ((int64_t)a->num_slots * a->rows_per_slot * (a->num_top + 1) > INT32_MAX)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->num_slots * rows_per_slot * (num_top + 1) must fit in int32", fn);
  if (a->num_token_ids != nullptr && a->token_ids == nullptr)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->num_token_ids is given but args->token_ids is NULL", fn);
  st = resolve_mask_stride(be, fn, a->allowed_token_masks, &a->allowed_mask_stride, V,
                           a->num_requests);
  if (st != DDS_OK) return st;
  if (!a->out_token_ids && !a->out_logprobs && !a->out_ranks)
    return fail(DDS_ERR_NULL_POINTER,
                "%s: no output given: set at least one of args->out_token_ids, out_logprobs, "
                "out_ranks",
                fn);
  struct P {
    const char* name;
    const void* p;
    size_t align;
  };
  const P ptrs[] = {{"row_offsets", a->row_offsets, 4},
                    {"logits", a->logits, dtype_size(a->dtype)},
                    {"keep", a->keep, 1},
                    {"slots", a->slots, 4},
                    {"num_valid", a->num_valid, 4},
                    {"temperatures", a->temperatures, 4},
                    {"committed_tokens", a->committed_tokens, 4},
                    {"token_ids", a->token_ids, 4},
                    {"num_token_ids", a->num_token_ids, 4},
                    {"out_token_ids", a->out_token_ids, 4},
                    {"out_logprobs", a->out_logprobs, 4},
                    {"out_ranks", a->out_ranks, 4},
                    {"request_status", a->request_status, 4}};
  for (const P& p : ptrs) {
    st = check_ptr(be, fn, p.name, p.p, p.align);
    if (st != DDS_OK) return st;
  }
  if ((st = debug_row_offsets(s, fn, a->row_offsets, a->num_requests, a->num_rows, stream)) !=
      DDS_OK)
    return st;
  if (debug_checks(s)) {
    const int32_t n = a->num_requests, ns = a->num_slots, nt = a->num_top;
    if ((st = debug_check_array(be, fn, "temperatures", a->temperatures, n, stream,
                                bad_temperature)) != DDS_OK)
      return st;
    if ((st = debug_check_array(be, fn, "slots", a->slots, n, stream, [ns](int32_t v) {
           return (v < 0 || v >= ns) ? "must be in [0, num_slots)" : nullptr;
         })) != DDS_OK)
      return st;
    if ((st = debug_check_array(be, fn, "num_token_ids", a->num_token_ids, n, stream,
                                [nt](int32_t v) {
                                  return (v < 0 || v > nt) ? "must be in [0, num_top]" : nullptr;
                                })) != DDS_OK)
      return st;
    // Input token ids (DDS_REQ_BAD_TOKEN_ID): each request's first num_token_ids[r] ids, every
    // row's committed token.
    if (a->token_ids && nt > 0) {
      std::vector<int32_t> ids, nids;
      if ((st = fetch(be, a->token_ids, (size_t)n * nt, &ids, stream)) != DDS_OK) return st;
      if (a->num_token_ids && (st = fetch(be, a->num_token_ids, (size_t)n, &nids, stream)) != DDS_OK)
        return st;
      for (int32_t r = 0; r < n; ++r) {
        const int32_t k = a->num_token_ids ? nids[r] : nt;
        for (int32_t e = 0; e < k; ++e)
          if (ids[(size_t)r * nt + e] < 0 || ids[(size_t)r * nt + e] >= V)
            return fail(DDS_ERR_INVALID_VALUE,
                        "%s: args->token_ids[%d] (request %d, id %d) = %d must be in [0, "
                        "vocab_size = %d)",
                        fn, r * nt + e, r, e, ids[(size_t)r * nt + e], V);
      }
    }
    if (a->committed_tokens) {
      std::vector<int32_t> ct;
      if ((st = fetch(be, a->committed_tokens, (size_t)a->num_rows, &ct, stream)) != DDS_OK)
        return st;
      for (int32_t i = 0; i < a->num_rows; ++i)
        if (ct[i] < 0 || ct[i] >= V)
          return fail(DDS_ERR_INVALID_VALUE,
                      "%s: args->committed_tokens[%d] (row %d) = %d must be in [0, vocab_size = %d)",
                      fn, i, i, ct[i], V);
    }
  }
  return DDS_OK;
}

}  // namespace

// The shared rules (checks.h).
dds_status check_num_rows(const char* fn, const dds_sampler* s, int32_t num_rows) {
  if (num_rows < 0)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_rows (%d) must be >= 0", fn, num_rows);
  if (num_rows > s->config.max_rows)
    return fail(DDS_ERR_CAPACITY, "%s: args->num_rows (%d) exceeds the sampler's max_rows (%d)", fn,
                num_rows, s->config.max_rows);
  return DDS_OK;
}

dds_status check_request_count(const char* fn, const dds_sampler* s, int32_t num_requests) {
  if (num_requests < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->num_requests (%d) must be >= 1", fn,
                num_requests);
  if (num_requests > s->config.max_requests)
    return fail(DDS_ERR_CAPACITY,
                "%s: args->num_requests (%d) exceeds the sampler's max_requests (%d)", fn,
                num_requests, s->config.max_requests);
  return DDS_OK;
}

dds_status check_requests_fit(const char* fn, int32_t num_requests, int32_t num_rows) {
  if (num_requests > num_rows)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->num_requests (%d) must be <= num_rows (%d) (every request owns a row; "
                "leave requests without rows out of the call)",
                fn, num_requests, num_rows);
  return DDS_OK;
}

dds_status check_requests(const char* fn, const dds_sampler* s, int32_t num_requests,
                          int32_t num_rows, const int32_t* row_offsets) {
  dds_status st = check_request_count(fn, s, num_requests);
  if (st == DDS_OK) st = check_requests_fit(fn, num_requests, num_rows);
  if (st != DDS_OK) return st;
  if (row_offsets == nullptr && num_requests != num_rows)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->row_offsets is NULL (one row per request) but num_requests (%d) != "
                "num_rows (%d)",
                fn, num_requests, num_rows);
  return DDS_OK;
}

dds_status check_dtype(const char* fn, const char* name, int32_t dtype) {
  if (!dtype_valid(dtype))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->%s (%d) is not a dds_dtype (0, 1 or 2)", fn,
                name, dtype);
  return DDS_OK;
}

dds_status check_logits(const char* fn, const void* logits, int32_t dtype, int64_t* row_stride,
                        int32_t vocab, int32_t num_rows) {
  if (logits == nullptr) return fail(DDS_ERR_NULL_POINTER, "%s: args->logits is NULL", fn);
  dds_status st = check_dtype(fn, "dtype", dtype);
  if (st != DDS_OK) return st;
  return resolve_stride(fn, "row_stride", row_stride, vocab, num_rows);
}

dds_status check_guidance_scale(const char* fn, float guidance_scale) {
  if (!std::isfinite(guidance_scale))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->guidance_scale (%g) must be finite", fn,
                (double)guidance_scale);
  return DDS_OK;
}

dds_status check_temperature(const char* fn, float temperature) {
  if (const char* r = bad_temperature(temperature))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->temperature (%g) %s", fn,
                (double)temperature, r);
  return DDS_OK;
}

dds_status check_filters(const char* fn, float temperature, int32_t top_k, float top_p,
                         float min_p) {
  dds_status st = check_temperature(fn, temperature);
  if (st != DDS_OK) return st;
  if (const char* r = bad_top_k(top_k))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->top_k (%d) %s", fn, top_k, r);
  if (const char* r = bad_top_p(top_p))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->top_p %s", fn, r);
  if (const char* r = bad_min_p(min_p))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->min_p (%g) %s", fn, (double)min_p, r);
  return DDS_OK;
}

dds_status check_banned_token(const char* fn, int32_t banned_token, int32_t vocab) {
  if (banned_token < -1 || banned_token >= vocab)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->banned_token (%d) must be -1 (none) or in [0, vocab_size = %d)", fn,
                banned_token, vocab);
  return DDS_OK;
}

dds_status check_stats(const char* fn, int32_t stats) {
  if (stats != DDS_STATS_PROCESSED && stats != DDS_STATS_GUIDED)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->stats (%d) must be DDS_STATS_PROCESSED (0) or DDS_STATS_GUIDED (1)", fn,
                stats);
  return DDS_OK;
}

dds_status check_sample_outputs(const char* fn, const dds_sample_args& a) {
  if (!a.tokens && !a.logprobs && !a.argmax && !a.confidence && !a.margin && !a.entropy &&
      !a.probs)
    return fail(DDS_ERR_NULL_POINTER,
                "%s: no output given: set at least one of args->tokens, logprobs, argmax, "
                "confidence, margin, entropy, probs",
                fn);
  return DDS_OK;
}

dds_status check_sample_ptrs(Backend& be, const char* fn, const dds_sample_args& a) {
  struct P {
    const char* name;
    const void* p;
    size_t align;
  };
  const P ptrs[] = {{"row_offsets", a.row_offsets, 4},
                    {"positions", a.positions, 4},
                    {"logits", a.logits, dtype_size(a.dtype)},
                    {"uncond_logits", a.uncond_logits, dtype_size(a.dtype)},
                    {"uncond_row_offsets", a.uncond_row_offsets, 4},
                    {"guidance_scales", a.guidance_scales, 4},
                    {"temperatures", a.temperatures, 4},
                    {"top_ks", a.top_ks, 4},
                    {"top_ps", a.top_ps, 4},
                    {"min_ps", a.min_ps, 4},
                    {"seeds", a.seeds, 8},
                    {"steps", a.steps, 4},
                    {"tokens", a.tokens, 4},
                    {"logprobs", a.logprobs, 4},
                    {"argmax", a.argmax, 4},
                    {"confidence", a.confidence, 4},
                    {"margin", a.margin, 4},
                    {"entropy", a.entropy, 4},
                    {"probs", a.probs, a.probs ? dtype_size(a.probs_dtype) : 1},
                    {"request_status", a.request_status, 4}};
  for (const P& p : ptrs) {
    dds_status st = check_ptr(be, fn, p.name, p.p, p.align);
    if (st != DDS_OK) return st;
  }
  return DDS_OK;
}

// Resolves a row stride (0 = vocab) and checks it.
dds_status resolve_stride(const char* fn, const char* name, int64_t* stride, int32_t vocab,
                          int64_t rows) {
  if (*stride == 0) *stride = vocab;
  if (*stride < vocab)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->%s (%lld) must be >= vocab_size (%d) or 0",
                fn, name, (long long)*stride, vocab);
  // (rows - 1) * stride must stay far from int64 overflow in the backends' index arithmetic (a
  // single row may have any stride: it is never multiplied).
  if (rows > 1 && *stride > (int64_t(1) << 62) / (rows - 1))
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->%s (%lld) times the rows - 1 (%lld) must be below 2^62 elements", fn,
                name, (long long)*stride, (long long)(rows - 1));
  return DDS_OK;
}

dds_status resolve_mask_stride(Backend& be, const char* fn, const int32_t* masks, int64_t* stride,
                               int32_t vocab, int32_t num_requests) {
  if (masks == nullptr) return DDS_OK;  // the stride is not read
  const int64_t words = allowed_words(vocab);
  if (*stride == 0) *stride = words;
  if (*stride < words)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->allowed_mask_stride (%lld) must be >= ceil(vocab_size / 32) = %lld "
                "(int32 words per request's mask) or 0",
                fn, (long long)*stride, (long long)words);
  if (num_requests > 1 && *stride > (int64_t(1) << 62) / (num_requests - 1))
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->allowed_mask_stride (%lld) times num_requests - 1 (%d) must be below "
                "2^62 words",
                fn, (long long)*stride, num_requests - 1);
  return check_ptr(be, fn, "allowed_token_masks", masks, 4);
}

// Alignment and residency (the backend's rule) of one argument pointer; NULL passes.
dds_status check_ptr(Backend& be, const char* fn, const char* name, const void* p,
                     size_t align) {
  if (p == nullptr) return DDS_OK;
  if (!aligned(p, align))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->%s (%p) must be aligned to %zu bytes", fn,
                name, p, align);
  return be.check_pointer(p, fn, name);
}

dds_status check_row_offsets(Backend& be, const char* fn, const int32_t* offs, int32_t num_requests,
                             int32_t num_rows, dds_stream stream) {
  std::vector<int32_t> h;
  dds_status st = fetch(be, offs, (size_t)num_requests + 1, &h, stream);
  if (st != DDS_OK) return st;
  // The conditions under which the backends flag DDS_REQ_BAD_ROW_OFFSETS (offsets::good), the
  // first flagged request named.
  for (int32_t r = 0; r < num_requests; ++r) {
    if (offsets::good(h[r], h[r + 1], r, num_requests, num_rows)) continue;
    if (r == 0 && h[0] != 0)
      return fail(DDS_ERR_INVALID_VALUE, "%s: args->row_offsets[0] (%d) must be 0", fn, h[0]);
    if (h[r + 1] < h[r])
      return fail(DDS_ERR_INVALID_VALUE,
                  "%s: args->row_offsets must be non-decreasing: row_offsets[%d] = %d < "
                  "row_offsets[%d] = %d (request %d)",
                  fn, r + 1, h[r + 1], r, h[r], r);
    if (r == num_requests - 1 && h[r + 1] != num_rows)
      return fail(DDS_ERR_INVALID_VALUE,
                  "%s: args->row_offsets[num_requests] (%d) must equal num_rows (%d)", fn,
                  h[r + 1], num_rows);
    return fail(DDS_ERR_INVALID_VALUE,
                "%s: args->row_offsets[%d..%d] (request %d) = [%d, %d) must lie in [0, num_rows = "
                "%d]",
                fn, r, r + 1, r, h[r], h[r + 1], num_rows);
  }
  return DDS_OK;
}

dds_status fail(dds_status status, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_last_error = buf;
  return status;
}

void clear_error() { g_last_error.clear(); }

}  // namespace dds

using dds::fail;

extern "C" {

DDS_API int32_t dds_version_number(void) { return DDS_VERSION_NUMBER; }
DDS_API const char* dds_version_string(void) { return dds::kVersionString; }
DDS_API int32_t dds_has_cuda(void) { return dds::cuda_backend_built() ? 1 : 0; }

DDS_API const char* dds_status_string(dds_status status_arg) {
  // Read as an integer: a C caller or a binding may pass any int (documented: unknown values
  // give "DDS_UNKNOWN_STATUS"), and loading a C++ enum outside its range is undefined (UBSan).
  static_assert(sizeof(dds_status) == sizeof(int32_t), "dds_status is 32 bits");
  int32_t status;
  std::memcpy(&status, &status_arg, sizeof status);
  switch (status) {
    case DDS_OK: return "DDS_OK";
    case DDS_ERR_INVALID_ARGUMENT: return "DDS_ERR_INVALID_ARGUMENT";
    case DDS_ERR_NULL_POINTER: return "DDS_ERR_NULL_POINTER";
    case DDS_ERR_CAPACITY: return "DDS_ERR_CAPACITY";
    case DDS_ERR_UNSUPPORTED: return "DDS_ERR_UNSUPPORTED";
    case DDS_ERR_NO_DEVICE: return "DDS_ERR_NO_DEVICE";
    case DDS_ERR_CUDA: return "DDS_ERR_CUDA";
    case DDS_ERR_OUT_OF_MEMORY: return "DDS_ERR_OUT_OF_MEMORY";
    case DDS_ERR_STRUCT_SIZE: return "DDS_ERR_STRUCT_SIZE";
    case DDS_ERR_INVALID_VALUE: return "DDS_ERR_INVALID_VALUE";
    case DDS_ERR_BUSY: return "DDS_ERR_BUSY";
    case DDS_ERR_INTERNAL: return "DDS_ERR_INTERNAL";
  }
  return "DDS_UNKNOWN_STATUS";
}

DDS_API const char* dds_last_error(void) { return dds::g_last_error.c_str(); }

DDS_API dds_status dds_sampler_config_init(dds_sampler_config* config, size_t struct_size) {
  dds_sampler_config c;
  std::memset(&c, 0, sizeof c);
  c.backend = DDS_BACKEND_CPU;
  c.device = 0;
  c.vocab_size = 0;
  c.max_rows = 4096;
  c.max_requests = 1024;
  c.max_stash_width = 20;
  c.flags = 0;
  c.num_threads = 0;
  return dds::init_struct("dds_sampler_config_init", "config", config, struct_size, c,
                          dds::kSamplerConfigV1Size);
}

DDS_API dds_status dds_sample_args_init(dds_sample_args* args, size_t struct_size) {
  dds_sample_args a;
  std::memset(&a, 0, sizeof a);
  a.num_requests = 1;
  a.dtype = DDS_DTYPE_F32;
  a.uncond_num_rows = 0;
  a.guidance_scale = 0.f;
  a.temperature = 1.f;
  a.top_k = 0;
  a.top_p = 1.f;
  a.min_p = 0.f;
  a.seed = 0;
  a.step = 0;
  a.banned_token = -1;
  a.stats = DDS_STATS_PROCESSED;
  a.probs_dtype = DDS_DTYPE_F32;
  return dds::init_struct("dds_sample_args_init", "args", args, struct_size, a,
                          dds::kSampleArgsV1Size);
}

DDS_API dds_status dds_stash_args_init(dds_stash_args* args, size_t struct_size) {
  dds_stash_args a;
  std::memset(&a, 0, sizeof a);
  a.num_requests = 1;
  a.dtype = DDS_DTYPE_F32;
  a.temperature = 1.f;
  a.num_top = 20;
  a.logits_mode = 0;
  return dds::init_struct("dds_stash_args_init", "args", args, struct_size, a,
                          dds::kStashArgsV1Size);
}

DDS_API dds_status dds_create(const dds_sampler_config* config, dds_sampler** out) {
  if (out) *out = nullptr;
  return dds::entry("dds_create", [&]() -> dds_status {
    if (!config) return fail(DDS_ERR_NULL_POINTER, "dds_create: config is NULL");
    if (!out) return fail(DDS_ERR_NULL_POINTER, "dds_create: out is NULL");
    if (config->struct_size < dds::kSamplerConfigV1Size)
      return fail(DDS_ERR_STRUCT_SIZE,
                  "dds_create: config->struct_size (%zu) is smaller than sizeof(dds_sampler_config) "
                  "of version 1 (%zu): call dds_sampler_config_init first",
                  config->struct_size, dds::kSamplerConfigV1Size);
    dds_sampler_config c;
    dds_sampler_config_init(&c, sizeof c);
    std::memcpy(&c, config, config->struct_size < sizeof c ? config->struct_size : sizeof c);
    c.struct_size = sizeof c;
    if (c.backend != DDS_BACKEND_CPU && c.backend != DDS_BACKEND_CUDA)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "dds_create: config->backend (%d) must be DDS_BACKEND_CPU (0) or "
                  "DDS_BACKEND_CUDA (1)",
                  c.backend);
    if (c.vocab_size < 1)
      return fail(DDS_ERR_INVALID_ARGUMENT, "dds_create: config->vocab_size (%d) must be >= 1",
                  c.vocab_size);
    if (c.max_rows < 1)
      return fail(DDS_ERR_INVALID_ARGUMENT, "dds_create: config->max_rows (%d) must be >= 1",
                  c.max_rows);
    if (c.max_requests < 1)
      return fail(DDS_ERR_INVALID_ARGUMENT, "dds_create: config->max_requests (%d) must be >= 1",
                  c.max_requests);
    if (c.max_stash_width < 0 || c.max_stash_width > 1024)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "dds_create: config->max_stash_width (%d) must be in [0, 1024]",
                  c.max_stash_width);
    if (c.backend == DDS_BACKEND_CUDA && c.device < 0)
      return fail(DDS_ERR_INVALID_ARGUMENT, "dds_create: config->device (%d) must be >= 0",
                  c.device);
    if ((c.flags & ~(uint32_t)DDS_FLAG_DEBUG_CHECKS) != 0)
      return fail(DDS_ERR_INVALID_ARGUMENT, "dds_create: config->flags (0x%x) has unknown bits",
                  c.flags);
    if (c.num_threads < 0 || c.num_threads > 256)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "dds_create: config->num_threads (%d) must be in [0, 256] (0 = default)",
                  c.num_threads);
    std::unique_ptr<dds_sampler> s(new dds_sampler);
    s->config = c;
    dds_status st = c.backend == DDS_BACKEND_CPU ? dds::make_cpu_backend(c, &s->backend)
                                                 : dds::make_cuda_backend(c, &s->backend);
    if (st != DDS_OK) return st;
    *out = s.release();
    return DDS_OK;
  });
}

DDS_API dds_status dds_destroy(dds_sampler* sampler) {
  return dds::entry("dds_destroy", [&]() -> dds_status {
    delete sampler;
    return DDS_OK;
  });
}

DDS_API dds_status dds_sampler_backend(const dds_sampler* sampler, int32_t* out) {
  dds::clear_error();
  if (!sampler) return fail(DDS_ERR_NULL_POINTER, "dds_sampler_backend: sampler is NULL");
  if (!out) return fail(DDS_ERR_NULL_POINTER, "dds_sampler_backend: out is NULL");
  *out = sampler->config.backend;
  return DDS_OK;
}

DDS_API dds_status dds_sample(dds_sampler* sampler, const dds_sample_args* args,
                              dds_stream stream) {
  return dds::args_entry("dds_sample", sampler, args, stream, dds::kSampleArgsV1Size,
                         "dds_sample_args", "dds_sample_args_init", dds_sample_args_init,
                         dds::validate_sample, [&](const dds_sample_args& a) {
                           return a.num_rows == 0 ? DDS_OK : sampler->backend->sample(a, stream);
                         });
}

DDS_API dds_status dds_stash_logprobs(dds_sampler* sampler, const dds_stash_args* args,
                                      dds_stream stream) {
  return dds::args_entry("dds_stash_logprobs", sampler, args, stream, dds::kStashArgsV1Size,
                         "dds_stash_args", "dds_stash_args_init", dds_stash_args_init,
                         dds::validate_stash, [&](const dds_stash_args& a) {
                           return a.num_rows == 0 ? DDS_OK : sampler->backend->stash(a, stream);
                         });
}

}  // extern "C"
