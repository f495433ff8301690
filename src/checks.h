// Host-side argument rules shared by the C entry points (api.cpp, api_decode.cpp, shard.cpp), and
// the frame every entry point runs in. Each rule lives here once; a caller runs them in its own
// order. Every check returns DDS_OK or fail(...) with a message naming `fn` and the argument.
#ifndef DDS_SRC_CHECKS_H_
#define DDS_SRC_CHECKS_H_

#include <cmath>
#include <utility>

#include "internal.h"

namespace dds {

// The rules of the scalar sampling parameters: nullptr when `v` passes, else the rule it breaks
// (also the debug-mode checks of the per-request arrays).
inline const char* bad_temperature(float t) {
  return (std::isnan(t) || t < 0.f || std::isinf(t)) ? "must be a finite temperature >= 0"
                                                     : nullptr;
}
inline const char* bad_guidance(float g) {
  return std::isfinite(g) ? nullptr : "must be a finite guidance scale";
}
inline const char* bad_top_k(int32_t k) { return k < 0 ? "must be >= 0 (0 = off)" : nullptr; }
inline const char* bad_top_p(float p) { return std::isnan(p) ? "must not be NaN" : nullptr; }
inline const char* bad_min_p(float p) {
  return (std::isnan(p) || p < 0.f) ? "must be >= 0 (0 = off)" : nullptr;
}

// DDS_FLAG_DEBUG_CHECKS is set on the sampler.
inline bool debug_checks(const dds_sampler* s) {
  return (s->config.flags & DDS_FLAG_DEBUG_CHECKS) != 0;
}
// In debug mode, check_row_offsets of args->row_offsets (nothing to check when it is NULL).
inline dds_status debug_row_offsets(const dds_sampler* s, const char* fn, const int32_t* offs,
                                    int32_t num_requests, int32_t num_rows, dds_stream stream) {
  if (offs == nullptr || !debug_checks(s)) return DDS_OK;
  return check_row_offsets(*s->backend, fn, offs, num_requests, num_rows, stream);
}

// args->num_rows: >= 0 (DDS_ERR_INVALID_ARGUMENT), <= max_rows (DDS_ERR_CAPACITY).
dds_status check_num_rows(const char* fn, const dds_sampler* s, int32_t num_rows);
// args->num_requests: >= 1 (DDS_ERR_INVALID_ARGUMENT), <= max_requests (DDS_ERR_CAPACITY).
dds_status check_request_count(const char* fn, const dds_sampler* s, int32_t num_requests);
// args->num_requests <= num_rows (every request owns a row).
dds_status check_requests_fit(const char* fn, int32_t num_requests, int32_t num_rows);
// check_request_count, check_requests_fit, then row_offsets NULL only with one row per request.
dds_status check_requests(const char* fn, const dds_sampler* s, int32_t num_requests,
                          int32_t num_rows, const int32_t* row_offsets);
// args-><name> is a dds_dtype.
dds_status check_dtype(const char* fn, const char* name, int32_t dtype);
// args->logits not NULL, args->dtype, args->row_stride (resolve_stride over num_rows).
dds_status check_logits(const char* fn, const void* logits, int32_t dtype, int64_t* row_stride,
                        int32_t vocab, int32_t num_rows);
dds_status check_guidance_scale(const char* fn, float guidance_scale);
dds_status check_temperature(const char* fn, float temperature);
// check_temperature, then top_k, top_p, min_p.
dds_status check_filters(const char* fn, float temperature, int32_t top_k, float top_p,
                         float min_p);
// args->banned_token: -1 or a token id.
dds_status check_banned_token(const char* fn, int32_t banned_token, int32_t vocab);
dds_status check_stats(const char* fn, int32_t stats);
// A dds_sample_args asks for at least one output (DDS_ERR_NULL_POINTER otherwise).
dds_status check_sample_outputs(const char* fn, const dds_sample_args& a);
// Alignment and residency of every pointer of a dds_sample_args.
dds_status check_sample_ptrs(Backend& be, const char* fn, const dds_sample_args& a);

// The guidance inputs of a dds_sample_args. `resolve(name, &stride, rows)` resolves a row stride
// (the full-row or the slice rule).
template <typename Resolve>
dds_status check_uncond(const char* fn, dds_sample_args* a, Resolve&& resolve) {
  if (a->uncond_logits != nullptr) {
    dds_status st = resolve("uncond_row_stride", &a->uncond_row_stride, a->uncond_num_rows);
    if (st != DDS_OK) return st;
    if (a->uncond_num_rows < 0)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: args->uncond_num_rows (%d) must be >= 0", fn,
                  a->uncond_num_rows);
    if (a->uncond_row_offsets == nullptr && a->uncond_num_rows < a->num_rows)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: args->uncond_num_rows (%d) must be >= num_rows (%d) when "
                  "uncond_row_offsets is NULL (uncond rows mirror the logits rows)",
                  fn, a->uncond_num_rows, a->num_rows);
  } else if (a->uncond_row_offsets != nullptr) {
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->uncond_row_offsets is given but args->uncond_logits is NULL", fn);
  }
  return DDS_OK;
}

// The probs output of a dds_sample_args (nothing to check without one); `resolve` as above.
template <typename Resolve>
dds_status check_probs(const char* fn, dds_sample_args* a, Resolve&& resolve) {
  if (a->probs == nullptr) return DDS_OK;
  dds_status st = check_dtype(fn, "probs_dtype", a->probs_dtype);
  if (st != DDS_OK) return st;
  return resolve("probs_row_stride", &a->probs_row_stride, a->num_rows);
}

// The frame of every C entry point: clears this thread's error, then runs f() under guarded.
template <typename F>
dds_status entry(const char* fn, F&& f) {
  clear_error();
  return guarded(fn, std::forward<F>(f));
}

// Runs f() holding the sampler (Busy); DDS_ERR_BUSY when another call holds it.
template <typename F>
dds_status exclusive(const char* fn, dds_sampler* s, F&& f) {
  Busy guard(s);
  if (!guard.ok())
    return fail(DDS_ERR_BUSY,
                "%s: sampler is in use by another thread (one call at a time per sampler; create "
                "one sampler per thread)",
                fn);
  return f();
}

// An entry point taking (sampler, args of type T, stream): load_args, hold the sampler, then
// validate(sampler, &a, stream) and, when that passes, run(a).
template <typename T, typename Run>
dds_status args_entry(const char* fn, dds_sampler* s, const T* args, dds_stream stream,
                      size_t v1_size, const char* type, const char* init_name,
                      dds_status (*init)(T*, size_t),
                      dds_status (*validate)(dds_sampler*, T*, dds_stream), Run&& run) {
  return entry(fn, [&]() -> dds_status {
    T a;
    dds_status st = load_args(fn, s, args, v1_size, type, init_name, init, &a);
    if (st != DDS_OK) return st;
    return exclusive(fn, s, [&]() -> dds_status {
      st = validate(s, &a, stream);
      return st != DDS_OK ? st : run(a);
    });
  });
}

}  // namespace dds

#endif  // DDS_SRC_CHECKS_H_
