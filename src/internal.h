// Internal host-side interfaces of libdds: the backend interface, error reporting, helpers.
// Nothing here is exported (hidden visibility + version script).
#ifndef DDS_SRC_INTERNAL_H_
#define DDS_SRC_INTERNAL_H_

#include <atomic>
#include <exception>
#include <new>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dds/dds.h"

namespace dds {

namespace ksample {
struct SamplePlanOverrides;  // kernels/sample/plan.h
}

// Records the thread-local error message (printf format) and returns `status`.
dds_status fail(dds_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void clear_error();

// Size of the first published version of each argument struct: the smallest struct_size that
// is accepted. (Fields appended later are defaulted when a caller passes an older size.)
constexpr size_t kSamplerConfigV1Size = offsetof(dds_sampler_config, num_threads);
constexpr size_t kSampleArgsV1Size = offsetof(dds_sample_args, allowed_token_masks);
constexpr size_t kStashArgsV1Size = offsetof(dds_stash_args, allowed_token_masks);
constexpr size_t kRevealArgsV1Size = offsetof(dds_reveal_args, entropy_bounds);
constexpr size_t kVerifyArgsV1Size = offsetof(dds_verify_args, allowed_token_masks);

// The body of every dds_*_init(out, struct_size): checks, then zeroes the caller's struct_size
// bytes, copies the defaults of the fields this build knows and sets struct_size. `name`: the
// pointer argument's name in messages; v1_size: the smallest struct_size accepted.
template <typename T>
dds_status init_struct(const char* fn, const char* name, T* out, size_t struct_size,
                       const T& defaults, size_t v1_size = sizeof(T)) {
  clear_error();
  if (!out) return fail(DDS_ERR_NULL_POINTER, "%s: %s is NULL", fn, name);
  if (struct_size < v1_size)
    return fail(DDS_ERR_STRUCT_SIZE,
                "%s: struct_size (%zu) is smaller than the size of the struct's version 1 (%zu)",
                fn, struct_size, v1_size);
  std::memset(out, 0, struct_size);
  std::memcpy(out, &defaults, sizeof(T) < struct_size ? sizeof(T) : struct_size);
  out->struct_size = struct_size;
  return DDS_OK;
}

// The start of every entry point taking (sampler, args): null checks, args->struct_size (at
// least v1_size), then *out = init's defaults with the caller's struct copied over them (fields
// an older caller's struct lacks keep their defaults), out->struct_size = this build's size.
// `type` / `init_name`: the struct and its init function, for the message.
template <typename T>
dds_status load_args(const char* fn, const void* sampler, const T* args, size_t v1_size,
                     const char* type, const char* init_name, dds_status (*init)(T*, size_t),
                     T* out) {
  if (!sampler) return fail(DDS_ERR_NULL_POINTER, "%s: sampler is NULL", fn);
  if (!args) return fail(DDS_ERR_NULL_POINTER, "%s: args is NULL", fn);
  if (args->struct_size < v1_size)
    return fail(DDS_ERR_STRUCT_SIZE,
                "%s: args->struct_size (%zu) is smaller than sizeof(%s) of version 1 (%zu): call "
                "%s first",
                fn, args->struct_size, type, v1_size, init_name);
  init(out, sizeof *out);
  std::memcpy(out, args, args->struct_size < sizeof *out ? args->struct_size : sizeof *out);
  out->struct_size = sizeof *out;
  return DDS_OK;
}

inline size_t dtype_size(int32_t dtype) {
  return dtype == DDS_DTYPE_F32 ? 4 : 2;
}
inline bool dtype_valid(int32_t dtype) {
  return dtype == DDS_DTYPE_F32 || dtype == DDS_DTYPE_BF16 || dtype == DDS_DTYPE_F16;
}

// A backend receives arguments that api.cpp has fully validated and normalised: struct_size is
// sizeof the current struct, strides of 0 are replaced by vocab_size, every host-visible rule
// holds. Device-resident per-request values are still the backend's to sanitise (see
// docs/sampling.md §1).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual dds_status sample(const dds_sample_args& args, dds_stream stream) = 0;
  virtual dds_status stash(const dds_stash_args& args, dds_stream stream) = 0;
  // Copies `bytes` from memory the backend's arguments live in to host memory and waits
  // (debug checks only; never on the hot path).
  virtual dds_status copy_to_host(void* dst, const void* src, size_t bytes, dds_stream stream) = 0;
  // Checks that `ptr` may be passed to this backend (residency); returns DDS_OK or an error
  // naming `name`.
  virtual dds_status check_pointer(const void* ptr, const char* fn, const char* name) = 0;
  // True when the arguments' arrays are directly readable on the host (CPU backend).
  virtual bool host_readable() const = 0;
  // Decoder primitives (api_decode.cpp). The CPU implementations live in api_decode.cpp and
  // are used whenever host_readable(); a device backend overrides these.
  virtual dds_status reveal(const dds_reveal_args&, dds_stream) {
    return fail(DDS_ERR_UNSUPPORTED, "dds_reveal: not implemented on this backend yet");
  }
  virtual dds_status verify(const dds_verify_args&, dds_stream) {
    return fail(DDS_ERR_UNSUPPORTED, "dds_verify_drafts: not implemented on this backend yet");
  }
  // The launch plan's overrides of a device backend (testing.h); nullptr where there is no plan.
  virtual ksample::SamplePlanOverrides* sample_plan_overrides() { return nullptr; }
  // Fills the scratch that sample, verify and reveal share (testing.h); DDS_ERR_UNSUPPORTED where
  // there is none.
  virtual dds_status fill_shared_scratch(unsigned char) {
    return fail(DDS_ERR_UNSUPPORTED, "fill_shared_scratch: this backend has no shared scratch");
  }
  // The rows the last dds_sample call's split fallback took (testing.h); DDS_ERR_UNSUPPORTED
  // where there is no launch plan.
  virtual dds_status sample_split_rows(int32_t, int32_t*) {
    return fail(DDS_ERR_UNSUPPORTED, "sample_split_rows: this backend has no launch plan");
  }
};

// Shared argument checks (api.cpp). resolve_stride: 0 -> vocab, must be >= vocab, and
// (rows - 1) * stride must stay below 2^62. check_row_offsets (debug mode): 0, non-decreasing,
// ends at num_rows, else DDS_ERR_INVALID_VALUE naming the first request the backends would flag
// DDS_REQ_BAD_ROW_OFFSETS (reads the offsets through the backend).
dds_status resolve_stride(const char* fn, const char* name, int64_t* stride, int32_t vocab,
                          int64_t rows);
// The allowed-token masks of a call (`masks` may be NULL: nothing to check): *stride 0 ->
// ceil(vocab / 32), must be >= that, (num_requests - 1) * stride below 2^62; alignment and
// residency of the pointer.
dds_status resolve_mask_stride(Backend& be, const char* fn, const int32_t* masks, int64_t* stride,
                               int32_t vocab, int32_t num_requests);
dds_status check_row_offsets(Backend& be, const char* fn, const int32_t* offs,
                             int32_t num_requests, int32_t num_rows, dds_stream stream);
// Alignment to `align` bytes and residency (Backend::check_pointer) of one pointer; NULL passes.
dds_status check_ptr(Backend& be, const char* fn, const char* name, const void* p, size_t align);
// Reads n elements of an argument array to the host (through the backend).
template <typename T>
dds_status fetch(Backend& be, const T* src, size_t n, std::vector<T>* dst, dds_stream stream) {
  dst->resize(n);
  if (n == 0) return DDS_OK;
  return be.copy_to_host(dst->data(), src, n * sizeof(T), stream);
}

dds_status make_cpu_backend(const dds_sampler_config& cfg, std::unique_ptr<Backend>* out);
// Defined in cuda_backend.cu when built with CUDA, else in no_cuda.cpp.
dds_status make_cuda_backend(const dds_sampler_config& cfg, std::unique_ptr<Backend>* out);
bool cuda_backend_built();

}  // namespace dds

struct dds_sampler {
  dds_sampler_config config;
  std::unique_ptr<dds::Backend> backend;
  std::atomic<bool> busy{false};
};

namespace dds {

// Runs f() for the C entry point `fn`, turning any C++ exception into a status: no exception
// crosses the C ABI.
template <typename F>
dds_status guarded(const char* fn, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(DDS_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  } catch (const std::exception& e) {
    return fail(DDS_ERR_INTERNAL, "%s: internal error: %s", fn, e.what());
  } catch (...) {
    return fail(DDS_ERR_INTERNAL, "%s: internal error (unknown exception)", fn);
  }
}

// The one-call-at-a-time rule of a sampler: ok() is false when another call is in progress.
struct Busy {
  explicit Busy(dds_sampler* s) : s_(s), ok_(!s->busy.exchange(true)) {}
  ~Busy() {
    if (ok_) s_->busy.store(false);
  }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
  bool ok() const { return ok_; }
  dds_sampler* s_;
  bool ok_;
};

}  // namespace dds

#endif  // DDS_SRC_INTERNAL_H_
