package dds

// Every call into libdds goes through this file.
//
// cgo rules (https://pkg.go.dev/cmd/cgo#hdr-Passing_pointers), Go 1.19 (no runtime.Pinner):
//   - Go may pass a Go pointer to C as a call argument if the memory it points to holds no Go
//     pointers; it stays valid (and unmoved) for the duration of the call.
//   - Go memory passed to C must not contain Go pointers, and Go pointers must not be stored in
//     C memory.
// A dds_sample_args holding the addresses of Go slices would break both rules (cgocheck panics:
// "cgo argument has Go pointer to Go pointer"). So the argument struct that Go
// fills holds only scalars (its pointer fields stay NULL), and every array is passed to a small
// C shim as a separate argument; the shim copies the struct onto its own C stack, stores the
// pointers there and calls libdds. That is zero-copy and within the rules: the pointers live
// only in C stack memory, only for the duration of the call, and libdds keeps none of them (the
// CPU backend finishes before returning).
//
// The same shims are instantiated a second time with uintptr_t parameters for raw pointers
// (CUDA device memory, or C memory on the CPU backend), which Go passes as plain integers.
//
// dds_last_error() is thread-local and a goroutine may move to another OS thread between two
// cgo calls, so each shim copies the message (malloc) inside the same C call that failed.

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dds/dds.h"

typedef struct ddsgo_result {
  int32_t status;
  char* msg; // malloc'ed copy of dds_last_error() when status != DDS_OK, else NULL
} ddsgo_result;

static ddsgo_result ddsgo_make_result(dds_status st) {
  ddsgo_result r;
  r.status = (int32_t)st;
  r.msg = NULL;
  if (st != DDS_OK) {
    const char* m = dds_last_error();
    if (m == NULL) m = "";
    size_t n = strlen(m) + 1;
    r.msg = (char*)malloc(n);
    if (r.msg != NULL) memcpy(r.msg, m, n);
  }
  return r;
}

static ddsgo_result ddsgo_sampler_config_init(dds_sampler_config* cfg) {
  return ddsgo_make_result(dds_sampler_config_init(cfg, sizeof(*cfg)));
}
static ddsgo_result ddsgo_sample_args_init(dds_sample_args* a) {
  return ddsgo_make_result(dds_sample_args_init(a, sizeof(*a)));
}
static ddsgo_result ddsgo_stash_args_init(dds_stash_args* a) {
  return ddsgo_make_result(dds_stash_args_init(a, sizeof(*a)));
}

typedef struct ddsgo_create_result {
  ddsgo_result r;
  dds_sampler* sampler;
} ddsgo_create_result;

static ddsgo_create_result ddsgo_create(const dds_sampler_config* cfg) {
  ddsgo_create_result out;
  out.sampler = NULL;
  out.r = ddsgo_make_result(dds_create(cfg, &out.sampler));
  return out;
}

static ddsgo_result ddsgo_destroy(dds_sampler* s) { return ddsgo_make_result(dds_destroy(s)); }

static int32_t ddsgo_backend(const dds_sampler* s) {
  int32_t b = -1;
  if (dds_sampler_backend(s, &b) != DDS_OK) return -1;
  return b;
}

// base: the scalars (its pointer fields are ignored). P: void* (Go slices) or uintptr_t (raw).
#define DDSGO_SAMPLE_SHIM(NAME, P)                                                          \
  static ddsgo_result NAME(dds_sampler* s, const dds_sample_args* base, P row_offsets,      \
                           P positions, P logits, P uncond_logits, P uncond_row_offsets,    \
                           P guidance_scales, P temperatures, P top_ks, P top_ps, P min_ps, \
                           P seeds, P steps, P tokens, P logprobs, P argmax, P confidence,  \
                           P margin, P entropy, P probs, P request_status,                  \
                           P allowed_token_masks, uintptr_t stream) {                       \
    dds_sample_args a = *base;                                                              \
    a.allowed_token_masks = (const int32_t*)allowed_token_masks;                            \
    a.row_offsets = (const int32_t*)row_offsets;                                            \
    a.positions = (const int32_t*)positions;                                                \
    a.logits = (const void*)logits;                                                         \
    a.uncond_logits = (const void*)uncond_logits;                                           \
    a.uncond_row_offsets = (const int32_t*)uncond_row_offsets;                              \
    a.guidance_scales = (const float*)guidance_scales;                                      \
    a.temperatures = (const float*)temperatures;                                            \
    a.top_ks = (const int32_t*)top_ks;                                                      \
    a.top_ps = (const float*)top_ps;                                                        \
    a.min_ps = (const float*)min_ps;                                                        \
    a.seeds = (const uint64_t*)seeds;                                                       \
    a.steps = (const uint32_t*)steps;                                                       \
    a.tokens = (int32_t*)tokens;                                                            \
    a.logprobs = (float*)logprobs;                                                          \
    a.argmax = (int32_t*)argmax;                                                            \
    a.confidence = (float*)confidence;                                                      \
    a.margin = (float*)margin;                                                              \
    a.entropy = (float*)entropy;                                                            \
    a.probs = (void*)probs;                                                                 \
    a.request_status = (int32_t*)request_status;                                            \
    return ddsgo_make_result(dds_sample(s, &a, (dds_stream)stream));                        \
  }
DDSGO_SAMPLE_SHIM(ddsgo_sample_go, void*)
DDSGO_SAMPLE_SHIM(ddsgo_sample_raw, uintptr_t)

#define DDSGO_STASH_SHIM(NAME, P)                                                           \
  static ddsgo_result NAME(dds_sampler* s, const dds_stash_args* base, P row_offsets,       \
                           P logits, P keep, P slots, P num_valid, P temperatures,          \
                           P committed_tokens, P token_ids, P num_token_ids,                \
                           P out_token_ids, P out_logprobs, P out_ranks, P request_status,  \
                           P allowed_token_masks, uintptr_t stream) {                       \
    dds_stash_args a = *base;                                                               \
    a.allowed_token_masks = (const int32_t*)allowed_token_masks;                            \
    a.row_offsets = (const int32_t*)row_offsets;                                            \
    a.logits = (const void*)logits;                                                         \
    a.keep = (const uint8_t*)keep;                                                          \
    a.slots = (const int32_t*)slots;                                                        \
    a.num_valid = (const int32_t*)num_valid;                                                \
    a.temperatures = (const float*)temperatures;                                            \
    a.committed_tokens = (const int32_t*)committed_tokens;                                  \
    a.token_ids = (const int32_t*)token_ids;                                                \
    a.num_token_ids = (const int32_t*)num_token_ids;                                        \
    a.out_token_ids = (int32_t*)out_token_ids;                                              \
    a.out_logprobs = (float*)out_logprobs;                                                  \
    a.out_ranks = (int32_t*)out_ranks;                                                      \
    a.request_status = (int32_t*)request_status;                                            \
    return ddsgo_make_result(dds_stash_logprobs(s, &a, (dds_stream)stream));                \
  }
DDSGO_STASH_SHIM(ddsgo_stash_go, void*)
DDSGO_STASH_SHIM(ddsgo_stash_raw, uintptr_t)
#define DDSGO_REVEAL_SHIM(NAME, P)                                                          \
  static ddsgo_result NAME(dds_sampler* s, const dds_reveal_args* base, P row_offsets,      \
                           P positions, P scores, P eligible, P policies, P counts,         \
                           P steps_left, P thresholds, P factors, P position_temperatures,  \
                           P seeds, P steps, P canvas, P tokens, P reveal, P num_revealed,  \
                           P finished, P request_status, P entropy_bounds,                  \
                           uintptr_t stream) {                                              \
    dds_reveal_args a = *base;                                                              \
    a.entropy_bounds = (const float*)entropy_bounds;                                        \
    a.row_offsets = (const int32_t*)row_offsets;                                            \
    a.positions = (const int32_t*)positions;                                                \
    a.scores = (const float*)scores;                                                        \
    a.eligible = (const uint8_t*)eligible;                                                  \
    a.policies = (const int32_t*)policies;                                                  \
    a.counts = (const int32_t*)counts;                                                      \
    a.steps_left = (const int32_t*)steps_left;                                              \
    a.thresholds = (const float*)thresholds;                                                \
    a.factors = (const float*)factors;                                                      \
    a.position_temperatures = (const float*)position_temperatures;                          \
    a.seeds = (const uint64_t*)seeds;                                                       \
    a.steps = (const uint32_t*)steps;                                                       \
    a.canvas = (int32_t*)canvas;                                                            \
    a.tokens = (const int32_t*)tokens;                                                      \
    a.reveal = (uint8_t*)reveal;                                                            \
    a.num_revealed = (int32_t*)num_revealed;                                                \
    a.finished = (int32_t*)finished;                                                        \
    a.request_status = (int32_t*)request_status;                                            \
    return ddsgo_make_result(dds_reveal(s, &a, (dds_stream)stream));                        \
  }
DDSGO_REVEAL_SHIM(ddsgo_reveal_go, void*)
DDSGO_REVEAL_SHIM(ddsgo_reveal_raw, uintptr_t)

#define DDSGO_VERIFY_SHIM(NAME, P)                                                          \
  static ddsgo_result NAME(dds_sampler* s, const dds_verify_args* base, P draft_counts,     \
                           P draft_tokens, P draft_logits, P target_logits, P temperatures, \
                           P top_ks, P top_ps, P min_ps, P seeds, P steps,                  \
                           P accepted_counts, P out_tokens, P out_logprobs,                 \
                           P request_status, P allowed_token_masks, uintptr_t stream) {     \
    dds_verify_args a = *base;                                                              \
    a.allowed_token_masks = (const int32_t*)allowed_token_masks;                            \
    a.draft_counts = (const int32_t*)draft_counts;                                          \
    a.draft_tokens = (const int32_t*)draft_tokens;                                          \
    a.draft_logits = (const void*)draft_logits;                                             \
    a.target_logits = (const void*)target_logits;                                           \
    a.temperatures = (const float*)temperatures;                                            \
    a.top_ks = (const int32_t*)top_ks;                                                      \
    a.top_ps = (const float*)top_ps;                                                        \
    a.min_ps = (const float*)min_ps;                                                        \
    a.seeds = (const uint64_t*)seeds;                                                       \
    a.steps = (const uint32_t*)steps;                                                       \
    a.accepted_counts = (int32_t*)accepted_counts;                                          \
    a.out_tokens = (int32_t*)out_tokens;                                                    \
    a.out_logprobs = (float*)out_logprobs;                                                  \
    a.request_status = (int32_t*)request_status;                                            \
    return ddsgo_make_result(dds_verify_drafts(s, &a, (dds_stream)stream));                 \
  }
DDSGO_VERIFY_SHIM(ddsgo_verify_go, void*)
DDSGO_VERIFY_SHIM(ddsgo_verify_raw, uintptr_t)

static ddsgo_result ddsgo_reveal_args_init(dds_reveal_args* a) {
  return ddsgo_make_result(dds_reveal_args_init(a, sizeof(*a)));
}
static ddsgo_result ddsgo_verify_args_init(dds_verify_args* a) {
  return ddsgo_make_result(dds_verify_args_init(a, sizeof(*a)));
}
*/
import "C"

import (
	"unsafe"
)

// toError turns a shim result into nil or an *Error, freeing the message copy.
func toError(r C.ddsgo_result) error {
	msg := ""
	if r.msg != nil {
		msg = C.GoString(r.msg)
		C.free(unsafe.Pointer(r.msg))
	}
	if Status(r.status) == StatusOK {
		return nil
	}
	return &Error{Code: Status(r.status), Message: msg}
}

func statusString(s Status) string {
	return C.GoString(C.dds_status_string(C.dds_status(s)))
}

// VersionNumber is the version of the loaded libdds: major*1000000 + minor*1000 + patch.
func VersionNumber() int { return int(C.dds_version_number()) }

// VersionString is the version of the loaded libdds, e.g. "0.1.0".
func VersionString() string { return C.GoString(C.dds_version_string()) }

// HeaderVersionNumber is the DDS_VERSION_NUMBER of the header this package was compiled with.
const HeaderVersionNumber = int(C.DDS_VERSION_NUMBER)

// HasCUDA reports whether the loaded libdds was built with the CUDA backend.
func HasCUDA() bool { return C.dds_has_cuda() != 0 }

// cSampler is the C handle.
type cSampler = *C.dds_sampler

func createSampler(cfg *Config) (cSampler, error) {
	var c C.dds_sampler_config
	if err := toError(C.ddsgo_sampler_config_init(&c)); err != nil {
		return nil, err
	}
	c.backend = C.int32_t(cfg.Backend)
	c.device = C.int32_t(cfg.Device)
	c.vocab_size = C.int32_t(cfg.VocabSize)
	if cfg.MaxRows != 0 {
		c.max_rows = C.int32_t(cfg.MaxRows)
	}
	if cfg.MaxRequests != 0 {
		c.max_requests = C.int32_t(cfg.MaxRequests)
	}
	if cfg.MaxStashWidth != 0 {
		c.max_stash_width = C.int32_t(cfg.MaxStashWidth)
	}
	c.flags = C.uint32_t(cfg.Flags)
	c.num_threads = C.int32_t(cfg.NumThreads)
	r := C.ddsgo_create(&c)
	if err := toError(r.r); err != nil {
		return nil, err
	}
	// Report the capacities actually used (defaults filled in).
	cfg.MaxRows = int(c.max_rows)
	cfg.MaxRequests = int(c.max_requests)
	cfg.MaxStashWidth = int(c.max_stash_width)
	return r.sampler, nil
}

func destroySampler(c cSampler) error { return toError(C.ddsgo_destroy(c)) }

func samplerBackend(c cSampler) Backend { return Backend(C.ddsgo_backend(c)) }

// defaultSampleParams returns the defaults of dds_sample_args_init.
func defaultSampleParams() SampleParams {
	var a C.dds_sample_args
	if err := toError(C.ddsgo_sample_args_init(&a)); err != nil {
		panic("dds: dds_sample_args_init failed: " + err.Error())
	}
	return SampleParams{
		DType:             DType(a.dtype),
		RowStride:         int(a.row_stride),
		UncondRowStride:   int(a.uncond_row_stride),
		UncondNumRows:     int(a.uncond_num_rows),
		GuidanceScale:     float32(a.guidance_scale),
		Temperature:       float32(a.temperature),
		TopK:              int32(a.top_k),
		TopP:              float32(a.top_p),
		MinP:              float32(a.min_p),
		Seed:              uint64(a.seed),
		Step:              uint32(a.step),
		BannedToken:       int32(a.banned_token),
		Stats:             StatsMode(a.stats),
		ProbsDType:        DType(a.probs_dtype),
		ProbsRowStride:    int(a.probs_row_stride),
		AllowedMaskStride: int(a.allowed_mask_stride),
		initialized:       true,
	}
}

// defaultStashParams returns the defaults of dds_stash_args_init.
func defaultStashParams() StashParams {
	var a C.dds_stash_args
	if err := toError(C.ddsgo_stash_args_init(&a)); err != nil {
		panic("dds: dds_stash_args_init failed: " + err.Error())
	}
	return StashParams{
		DType:             DType(a.dtype),
		RowStride:         int(a.row_stride),
		Temperature:       float32(a.temperature),
		NumTop:            int(a.num_top),
		Mode:              StashMode(a.logits_mode),
		NumSlots:          int(a.num_slots),
		RowsPerSlot:       int(a.rows_per_slot),
		AllowedMaskStride: int(a.allowed_mask_stride),
		initialized:       true,
	}
}

// cSampleArgs fills the scalar part of a dds_sample_args (pointer fields stay NULL). The
// values were range-checked by SampleParams.check.
func cSampleArgs(p *SampleParams, out *C.dds_sample_args) error {
	if err := toError(C.ddsgo_sample_args_init(out)); err != nil {
		return err
	}
	out.num_rows = C.int32_t(p.NumRows)
	out.num_requests = C.int32_t(p.NumRequests)
	out.dtype = C.int32_t(p.DType)
	out.row_stride = C.int64_t(p.RowStride)
	out.uncond_row_stride = C.int64_t(p.UncondRowStride)
	out.uncond_num_rows = C.int32_t(p.UncondNumRows)
	out.guidance_scale = C.float(p.GuidanceScale)
	out.temperature = C.float(p.Temperature)
	out.top_k = C.int32_t(p.TopK)
	out.top_p = C.float(p.TopP)
	out.min_p = C.float(p.MinP)
	out.seed = C.uint64_t(p.Seed)
	out.step = C.uint32_t(p.Step)
	out.banned_token = C.int32_t(p.BannedToken)
	out.stats = C.int32_t(p.Stats)
	out.probs_dtype = C.int32_t(p.ProbsDType)
	out.probs_row_stride = C.int64_t(p.ProbsRowStride)
	out.allowed_mask_stride = C.int64_t(p.AllowedMaskStride)
	return nil
}

func cStashArgs(p *StashParams, out *C.dds_stash_args) error {
	if err := toError(C.ddsgo_stash_args_init(out)); err != nil {
		return err
	}
	out.num_rows = C.int32_t(p.NumRows)
	out.num_requests = C.int32_t(p.NumRequests)
	out.dtype = C.int32_t(p.DType)
	out.row_stride = C.int64_t(p.RowStride)
	out.temperature = C.float(p.Temperature)
	out.num_top = C.int32_t(p.NumTop)
	out.logits_mode = C.int32_t(p.Mode)
	out.num_slots = C.int32_t(p.NumSlots)
	out.rows_per_slot = C.int32_t(p.RowsPerSlot)
	out.allowed_mask_stride = C.int64_t(p.AllowedMaskStride)
	return nil
}

// sampleGo runs dds_sample on Go memory. p[i] are the addresses of the first elements of the
// caller's slices (or nil); they are passed directly as call arguments (see the top of this
// file), which is what keeps them valid and within the cgo rules.
func sampleGo(c cSampler, sp *SampleParams, p *samplePtrs) error {
	var base C.dds_sample_args
	if err := cSampleArgs(sp, &base); err != nil {
		return err
	}
	return toError(C.ddsgo_sample_go(c, &base, p.rowOffsets, p.positions, p.logits, p.uncondLogits,
		p.uncondRowOffsets, p.guidanceScales, p.temperatures, p.topKs, p.topPs, p.minPs, p.seeds,
		p.steps, p.tokens, p.logprobs, p.argmax, p.confidence, p.margin, p.entropy, p.probs,
		p.requestStatus, p.allowedTokenMasks, 0))
}

func sampleRaw(c cSampler, sp *SampleParams, a *DeviceSampleArgs, stream uintptr) error {
	var base C.dds_sample_args
	if err := cSampleArgs(sp, &base); err != nil {
		return err
	}
	u := func(p uintptr) C.uintptr_t { return C.uintptr_t(p) }
	return toError(C.ddsgo_sample_raw(c, &base, u(a.RowOffsets), u(a.Positions), u(a.Logits),
		u(a.UncondLogits), u(a.UncondRowOffsets), u(a.GuidanceScales), u(a.Temperatures),
		u(a.TopKs), u(a.TopPs), u(a.MinPs), u(a.Seeds), u(a.Steps), u(a.Tokens), u(a.Logprobs),
		u(a.Argmax), u(a.Confidence), u(a.Margin), u(a.Entropy), u(a.Probs), u(a.RequestStatus),
		u(a.AllowedTokenMasks), u(stream)))
}

func stashGo(c cSampler, sp *StashParams, p *stashPtrs) error {
	var base C.dds_stash_args
	if err := cStashArgs(sp, &base); err != nil {
		return err
	}
	return toError(C.ddsgo_stash_go(c, &base, p.rowOffsets, p.logits, p.keep, p.slots, p.numValid,
		p.temperatures, p.committedTokens, p.tokenIDs, p.numTokenIDs, p.outTokenIDs,
		p.outLogprobs, p.outRanks, p.requestStatus, p.allowedTokenMasks, 0))
}

func stashRaw(c cSampler, sp *StashParams, a *DeviceStashArgs, stream uintptr) error {
	var base C.dds_stash_args
	if err := cStashArgs(sp, &base); err != nil {
		return err
	}
	u := func(p uintptr) C.uintptr_t { return C.uintptr_t(p) }
	return toError(C.ddsgo_stash_raw(c, &base, u(a.RowOffsets), u(a.Logits), u(a.Keep), u(a.Slots),
		u(a.NumValid), u(a.Temperatures), u(a.CommittedTokens), u(a.TokenIDs), u(a.NumTokenIDs),
		u(a.OutTokenIDs), u(a.OutLogprobs), u(a.OutRanks), u(a.RequestStatus),
		u(a.AllowedTokenMasks), u(stream)))
}

// defaultRevealParams returns the defaults of dds_reveal_args_init (NumRequests 0: inferred).
func defaultRevealParams() RevealParams {
	var a C.dds_reveal_args
	if err := toError(C.ddsgo_reveal_args_init(&a)); err != nil {
		panic("dds: dds_reveal_args_init failed: " + err.Error())
	}
	return RevealParams{
		Policy:              RevealPolicy(a.policy),
		Count:               int32(a.count),
		Threshold:           float32(a.threshold),
		Factor:              float32(a.factor),
		PositionTemperature: float32(a.position_temperature),
		EntropyBound:        float32(a.entropy_bound),
		Seed:                uint64(a.seed),
		Step:                uint32(a.step),
		CanvasStride:        int(a.canvas_stride),
		CanvasLength:        int(a.canvas_length),
		MaskToken:           int32(a.mask_token),
		EOSToken:            int32(a.eos_token),
		initialized:         true,
	}
}

// defaultVerifyParams returns the defaults of dds_verify_args_init.
func defaultVerifyParams() VerifyParams {
	var a C.dds_verify_args
	if err := toError(C.ddsgo_verify_args_init(&a)); err != nil {
		panic("dds: dds_verify_args_init failed: " + err.Error())
	}
	return VerifyParams{
		NumRequests:       int(a.num_requests),
		NumDrafts:         int(a.num_drafts),
		DraftRowStride:    int(a.draft_row_stride),
		TargetRowStride:   int(a.target_row_stride),
		DType:             DType(a.dtype),
		Temperature:       float32(a.temperature),
		TopK:              int32(a.top_k),
		TopP:              float32(a.top_p),
		MinP:              float32(a.min_p),
		Seed:              uint64(a.seed),
		Step:              uint32(a.step),
		BannedToken:       int32(a.banned_token),
		AllowedMaskStride: int(a.allowed_mask_stride),
		initialized:       true,
	}
}

func cRevealArgs(p *RevealParams, out *C.dds_reveal_args) error {
	if err := toError(C.ddsgo_reveal_args_init(out)); err != nil {
		return err
	}
	out.num_rows = C.int32_t(p.NumRows)
	out.num_requests = C.int32_t(p.NumRequests)
	out.policy = C.int32_t(p.Policy)
	out.count = C.int32_t(p.Count)
	out.threshold = C.float(p.Threshold)
	out.factor = C.float(p.Factor)
	out.position_temperature = C.float(p.PositionTemperature)
	out.entropy_bound = C.float(p.EntropyBound)
	out.seed = C.uint64_t(p.Seed)
	out.step = C.uint32_t(p.Step)
	out.canvas_stride = C.int64_t(p.CanvasStride)
	out.canvas_length = C.int32_t(p.CanvasLength)
	out.mask_token = C.int32_t(p.MaskToken)
	out.eos_token = C.int32_t(p.EOSToken)
	return nil
}

func cVerifyArgs(p *VerifyParams, out *C.dds_verify_args) error {
	if err := toError(C.ddsgo_verify_args_init(out)); err != nil {
		return err
	}
	out.num_requests = C.int32_t(p.NumRequests)
	out.num_drafts = C.int32_t(p.NumDrafts)
	out.draft_row_stride = C.int64_t(p.DraftRowStride)
	out.target_row_stride = C.int64_t(p.TargetRowStride)
	out.dtype = C.int32_t(p.DType)
	out.temperature = C.float(p.Temperature)
	out.top_k = C.int32_t(p.TopK)
	out.top_p = C.float(p.TopP)
	out.min_p = C.float(p.MinP)
	out.seed = C.uint64_t(p.Seed)
	out.step = C.uint32_t(p.Step)
	out.banned_token = C.int32_t(p.BannedToken)
	out.allowed_mask_stride = C.int64_t(p.AllowedMaskStride)
	return nil
}

func revealGo(c cSampler, rp *RevealParams, p *revealPtrs) error {
	var base C.dds_reveal_args
	if err := cRevealArgs(rp, &base); err != nil {
		return err
	}
	return toError(C.ddsgo_reveal_go(c, &base, p.rowOffsets, p.positions, p.scores, p.eligible,
		p.policies, p.counts, p.stepsLeft, p.thresholds, p.factors, p.positionTemperatures,
		p.seeds, p.steps, p.canvas, p.tokens, p.reveal, p.numRevealed, p.finished,
		p.requestStatus, p.entropyBounds, 0))
}

func revealRaw(c cSampler, rp *RevealParams, a *DeviceRevealArgs, stream uintptr) error {
	var base C.dds_reveal_args
	if err := cRevealArgs(rp, &base); err != nil {
		return err
	}
	u := func(p uintptr) C.uintptr_t { return C.uintptr_t(p) }
	return toError(C.ddsgo_reveal_raw(c, &base, u(a.RowOffsets), u(a.Positions), u(a.Scores),
		u(a.Eligible), u(a.Policies), u(a.Counts), u(a.StepsLeft), u(a.Thresholds), u(a.Factors),
		u(a.PositionTemperatures), u(a.Seeds), u(a.Steps), u(a.Canvas), u(a.Tokens), u(a.Reveal),
		u(a.NumRevealed), u(a.Finished), u(a.RequestStatus), u(a.EntropyBounds), u(stream)))
}

func verifyGo(c cSampler, vp *VerifyParams, p *verifyPtrs) error {
	var base C.dds_verify_args
	if err := cVerifyArgs(vp, &base); err != nil {
		return err
	}
	return toError(C.ddsgo_verify_go(c, &base, p.draftCounts, p.draftTokens, p.draftLogits,
		p.targetLogits, p.temperatures, p.topKs, p.topPs, p.minPs, p.seeds, p.steps,
		p.acceptedCounts, p.outTokens, p.outLogprobs, p.requestStatus, p.allowedTokenMasks, 0))
}

func verifyRaw(c cSampler, vp *VerifyParams, a *DeviceVerifyArgs, stream uintptr) error {
	var base C.dds_verify_args
	if err := cVerifyArgs(vp, &base); err != nil {
		return err
	}
	u := func(p uintptr) C.uintptr_t { return C.uintptr_t(p) }
	return toError(C.ddsgo_verify_raw(c, &base, u(a.DraftCounts), u(a.DraftTokens),
		u(a.DraftLogits), u(a.TargetLogits), u(a.Temperatures), u(a.TopKs), u(a.TopPs),
		u(a.MinPs), u(a.Seeds), u(a.Steps), u(a.AcceptedCounts), u(a.OutTokens),
		u(a.OutLogprobs), u(a.RequestStatus), u(a.AllowedTokenMasks), u(stream)))
}
