/*
 * dds — the discrete diffusion sampler.
 *
 * One public header, pure C99 (also valid C++), no CUDA headers. Every entry point returns a
 * dds_status; on failure a thread-local message naming the argument and the rule it broke is
 * available from dds_last_error(). Argument structs begin with `struct_size`, are append-only,
 * and are initialised with their dds_*_init() function (bindings cannot use macro initialisers).
 *
 * Memory: with the CUDA backend every array pointer in dds_sample_args / dds_stash_args is a
 * device pointer (device or managed memory of the sampler's device) and work is queued on the
 * caller's stream; with the CPU backend every pointer is a host pointer and the call completes
 * before it returns (the stream argument is ignored). Scalars marked "(host)" are read on the
 * host in both cases. Nothing in dds_sample / dds_stash_logprobs allocates, synchronises the host
 * or reads device memory back (except in DDS_FLAG_DEBUG_CHECKS mode, see below).
 *
 * Thread safety: different samplers may be used from different threads concurrently. One sampler
 * must not be used by two threads at the same time (it owns one scratch workspace); the library
 * detects overlapping calls on one sampler where cheap and returns DDS_ERR_BUSY. On the CUDA
 * backend the work of one sampler must also stay stream-ordered: queue all of a sampler's calls on
 * one stream (or order the streams with events), since queued calls share its workspace.
 *
 * The exact semantics (formulas, filter order, the random number spec) are in docs/sampling.md.
 */
#ifndef DDS_DDS_H_
#define DDS_DDS_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(DDS_BUILDING_LIBRARY)
#define DDS_API __declspec(dllexport)
#else
#define DDS_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define DDS_API __attribute__((visibility("default")))
#else
#define DDS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Version. DDS_VERSION_NUMBER = major * 1000000 + minor * 1000 + patch (room for 999 minors and
 * patches). The SONAME is libdds.so.<major>; within a major version the ABI only grows
 * (new functions, new fields appended to argument structs).
 * ------------------------------------------------------------------------------------------- */
#define DDS_VERSION_MAJOR 0
#define DDS_VERSION_MINOR 1
#define DDS_VERSION_PATCH 0
#define DDS_VERSION_NUMBER \
  (DDS_VERSION_MAJOR * 1000000 + DDS_VERSION_MINOR * 1000 + DDS_VERSION_PATCH)

/** Version of the loaded library (compare with DDS_VERSION_NUMBER after dlopen). */
DDS_API int32_t dds_version_number(void);
/** Version string of the loaded library, e.g. "0.1.0". Static storage. */
DDS_API const char* dds_version_string(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes. Values are fixed forever; new codes may be added.
 * ------------------------------------------------------------------------------------------- */
typedef enum dds_status {
  DDS_OK = 0,
  DDS_ERR_INVALID_ARGUMENT = 1, /* a value breaks a rule (size, stride, enum, range, ...) */
  DDS_ERR_NULL_POINTER = 2,     /* a required pointer is NULL */
  DDS_ERR_CAPACITY = 3,         /* exceeds a capacity declared at dds_create */
  DDS_ERR_UNSUPPORTED = 4,      /* valid but not supported by this build or backend */
  DDS_ERR_NO_DEVICE = 5,        /* CUDA backend asked for, but no usable CUDA device */
  DDS_ERR_CUDA = 6,             /* a CUDA runtime call failed; the message has its text */
  DDS_ERR_OUT_OF_MEMORY = 7,    /* allocation failed (only in dds_create) */
  DDS_ERR_STRUCT_SIZE = 8,      /* struct_size is 0 or smaller than the first version's size */
  DDS_ERR_INVALID_VALUE = 9,    /* debug mode: a per-request array value is out of range */
  DDS_ERR_BUSY = 10,            /* the sampler is in use by another thread */
  DDS_ERR_INTERNAL = 11         /* a bug in dds; please report */
} dds_status;

/** Static name of a status code ("DDS_OK", ...); "DDS_UNKNOWN_STATUS" for unknown values. */
DDS_API const char* dds_status_string(dds_status status);

/** Message of the last failed call on this thread ("" if none). Valid until the next dds call
 *  on this thread. Names the argument and the rule, e.g.
 *  "dds_sample: args->row_stride (100) must be >= vocab_size (1025)". */
DDS_API const char* dds_last_error(void);

/* ---------------------------------------------------------------------------------------------
 * Enumerations (explicit values, stored as int32_t in the structs).
 * ------------------------------------------------------------------------------------------- */
typedef enum dds_backend { DDS_BACKEND_CPU = 0, DDS_BACKEND_CUDA = 1 } dds_backend;

typedef enum dds_dtype { DDS_DTYPE_F32 = 0, DDS_DTYPE_BF16 = 1, DDS_DTYPE_F16 = 2 } dds_dtype;

/** Which distribution the statistics (logprob, confidence, margin, entropy, probs) describe. */
typedef enum dds_stats_mode {
  DDS_STATS_PROCESSED = 0, /* after guidance, ban, temperature and filters (what was sampled) */
  DDS_STATS_GUIDED = 1     /* after guidance and ban only: temperature 1, no filters */
} dds_stats_mode;

/** Sampler flags (dds_sampler_config.flags). */
#define DDS_FLAG_DEBUG_CHECKS 1u /* validate device-resident per-request arrays on the host
                                    (copies them back and synchronises: slow, for debugging) */

/** Bits of the optional per-request status array (int32_t per request, 0 = all good). A set bit
 *  means a value was out of range and was replaced by the documented rule; the call still
 *  succeeds. In debug mode the same conditions are returned as DDS_ERR_INVALID_VALUE. */
#define DDS_REQ_BAD_TEMPERATURE 1   /* NaN, negative or infinite: 1.0 used */
#define DDS_REQ_BAD_GUIDANCE 2      /* NaN or infinite guidance scale: 0 (no guidance) used */
#define DDS_REQ_BAD_TOP_K 4         /* negative: 0 (off) used */
#define DDS_REQ_BAD_TOP_P 8         /* NaN: 1 (off) used */
#define DDS_REQ_BAD_MIN_P 16        /* NaN or negative: 0 (off) used */
#define DDS_REQ_BAD_UNCOND_ROWS 32  /* uncond rows outside [0, uncond_num_rows): no guidance */
#define DDS_REQ_EMPTY_ROW 64        /* a row had no finite, unbanned, allowed column: token 0 */
#define DDS_REQ_BAD_SLOT 128        /* stash: slot outside [0, num_slots): request skipped */

/* ---------------------------------------------------------------------------------------------
 * Sampler creation.
 * ------------------------------------------------------------------------------------------- */
typedef struct dds_sampler dds_sampler; /* opaque */

/** The CUDA stream type: the same type as cudaStream_t / CUstream. NULL = legacy default. */
typedef struct CUstream_st* dds_stream;

typedef struct dds_sampler_config {
  size_t struct_size;      /* sizeof(dds_sampler_config), set by dds_sampler_config_init */
  int32_t backend;         /* dds_backend. Default DDS_BACKEND_CPU */
  int32_t device;          /* CUDA device ordinal (CUDA backend only). Default 0 */
  int32_t vocab_size;      /* V: columns of every logits row, >= 1. Required (default 0) */
  int32_t max_rows;        /* capacity: most rows in one call, >= 1. Default 4096 */
  int32_t max_requests;    /* capacity: most requests in one call, >= 1. Default 1024 */
  int32_t max_stash_width; /* capacity: largest stash top-n, 0..1024. Default 20 */
  uint32_t flags;          /* DDS_FLAG_* bits. Default 0 */
  /* CPU backend: threads that share a call's rows, 0..256 (the caller's thread plus
   * num_threads - 1 workers started by dds_create). 0 = the default: the machine's hardware
   * threads, at most 8. 1 = single-threaded. Outputs do not depend on it. Ignored by CUDA. */
  int32_t num_threads;
} dds_sampler_config;

/** Fills *config with defaults and config->struct_size = struct_size. Pass sizeof(*config).
 *  Returns DDS_ERR_STRUCT_SIZE if struct_size is too small for the first version of the struct. */
DDS_API dds_status dds_sampler_config_init(dds_sampler_config* config, size_t struct_size);

/** Creates a sampler: validates the config, and on the CUDA backend selects the device and
 *  allocates the scratch workspace sized from the capacities (the only allocation dds makes).
 *  *out is set to NULL on failure. DDS_ERR_NO_DEVICE if the CUDA backend is asked for where no
 *  device exists or the library was built without CUDA (DDS_ERR_UNSUPPORTED in the latter). */
DDS_API dds_status dds_create(const dds_sampler_config* config, dds_sampler** out);

/** Destroys a sampler (NULL is allowed and does nothing). With the CUDA backend the caller must
 *  make sure no work queued with this sampler is still running (e.g. synchronise the stream). */
DDS_API dds_status dds_destroy(dds_sampler* sampler);

/** Backend of a sampler (DDS_BACKEND_*), written to *out. */
DDS_API dds_status dds_sampler_backend(const dds_sampler* sampler, int32_t* out);

/** 1 if this build of the library has the CUDA backend, else 0. */
DDS_API int32_t dds_has_cuda(void);

/* ---------------------------------------------------------------------------------------------
 * dds_sample: one denoising step for every row.
 *
 * Rows of all requests are packed: request r owns rows [row_offsets[r], row_offsets[r+1]).
 * Per row, with c the conditional logits, u the unconditional logits (guided requests only),
 * g, T, k, p, min_p the request's parameters:
 *   l = fmaf(g, c - u, c)              (guidance; l = c for unguided requests; -inf if c or u is)
 *   l[banned_token] = -inf; l[t] = -inf where t is not allowed (allowed_token_masks);
 *   NaN -> -inf; +inf -> FLT_MAX
 *   a = l * (1/T)                      (fp32; T = 0 is greedy: token = argmax l, ties lower id)
 *   keep = top-k, then top-p, then min-p of softmax(a), each renormalising the previous set
 *   token ~ softmax(a) over keep       (two-level Gumbel-max, counter-based Philox noise)
 * Per-request arrays may be NULL: the scalar field of the same name (singular) is used.
 * ------------------------------------------------------------------------------------------- */
typedef struct dds_sample_args {
  size_t struct_size; /* sizeof(dds_sample_args), set by dds_sample_args_init */

  /* --- layout --- */
  int32_t num_rows;     /* (host) rows in this call, 0..max_rows. 0 is a no-op */
  int32_t num_requests; /* (host) requests, 1..max_requests */
  /* [num_requests + 1] row offsets: 0 = row_offsets[0] <= ... <= row_offsets[num_requests] =
   * num_rows. NULL: one row per request (num_requests must equal num_rows). Offsets that break
   * this: the requests concerned own no rows, flagged DDS_REQ_BAD_ROW_OFFSETS (docs/sampling.md
   * §1 has the exact rule: every row is still written, and owned by at most one request). */
  const int32_t* row_offsets;
  /* [num_rows] canvas position of each row, used to key the random numbers (so packing only the
   * masked rows of a canvas does not change the draws). NULL: the row's index in its request. */
  const int32_t* positions;

  /* --- logits --- */
  const void* logits;   /* [num_rows, row_stride] conditional logits, dtype `dtype`. Required */
  int32_t dtype;        /* (host) dds_dtype of logits and uncond_logits. Default F32 */
  int64_t row_stride;   /* (host) elements between rows, >= vocab_size. Default 0 = vocab_size */

  /* --- classifier-free guidance --- */
  /* [uncond_num_rows, uncond_row_stride] unconditional logits, or NULL (no request guided). */
  const void* uncond_logits;
  int64_t uncond_row_stride; /* (host) elements between rows, >= vocab_size. 0 = vocab_size */
  int32_t uncond_num_rows;   /* (host) rows in uncond_logits (bound for the offsets below) */
  /* [num_requests] first uncond row of each request, -1 = request not guided; row j of request
   * r uses uncond row uncond_row_offsets[r] + j. NULL: uncond_logits has the same layout as
   * logits (uncond row = cond row) and every request is guided. */
  const int32_t* uncond_row_offsets;
  const float* guidance_scales; /* [num_requests] g, or NULL -> guidance_scale */
  float guidance_scale;         /* default g. Default 0 (off) */

  /* --- temperature and filters, per request --- */
  const float* temperatures; /* [num_requests] T >= 0, or NULL -> temperature */
  float temperature;         /* default T. Default 1 */
  const int32_t* top_ks;     /* [num_requests] k >= 0 (0 = off; k >= V = off), or NULL */
  int32_t top_k;             /* default k. Default 0 */
  const float* top_ps;       /* [num_requests] p in (0, 1] (1 = off; p <= 0 keeps 1 token) */
  float top_p;               /* default p. Default 1 */
  const float* min_ps;       /* [num_requests] min_p in [0, 1] (0 = off) or NULL */
  float min_p;               /* default min_p. Default 0 */

  /* --- randomness, per request --- */
  const uint64_t* seeds; /* [num_requests] Philox key, or NULL -> seed */
  uint64_t seed;         /* default seed. Default 0 */
  const uint32_t* steps; /* [num_requests] denoising step (part of the counter), or NULL */
  uint32_t step;         /* default step. Default 0 */

  int32_t banned_token; /* (host) token id never sampled nor counted (the mask token), -1 none */
  int32_t stats;        /* (host) dds_stats_mode for logprobs/confidence/margin/entropy/probs */

  /* --- outputs, each optional (NULL skips it), [num_rows] unless said --- */
  int32_t* tokens;    /* sampled token id */
  float* logprobs;    /* log-probability of the sampled token under the `stats` distribution */
  int32_t* argmax;    /* most likely token (ties: lower id); the same under both stats modes */
  float* confidence;  /* max probability of the `stats` distribution */
  float* margin;      /* p1 - p2 (largest minus second largest probability; p2 = 0 if none) */
  float* entropy;     /* -sum p log p in nats over the `stats` distribution */
  void* probs;        /* [num_rows, probs_row_stride] the `stats` distribution, probs_dtype */
  int32_t probs_dtype;      /* (host) dds_dtype of probs. Default F32 */
  int64_t probs_row_stride; /* (host) elements between probs rows, >= V. 0 = vocab_size */
  int32_t* request_status;  /* [num_requests] DDS_REQ_* bits, optional */

  /* --- allowed token sets (appended: an older struct_size leaves them NULL / 0) --- */
  /* [num_requests, allowed_mask_stride] packed bitmask, or NULL = every token allowed. Token t
   * of request r is allowed when bit (t & 31) of word r * allowed_mask_stride + (t >> 5) is set
   * (xgrammar's layout); bits of t >= vocab_size are ignored. A disallowed column is -inf
   * exactly like the banned token (both stats modes), applied in the same pass over the logits
   * (no masked copy). A row left with no finite allowed column: DDS_REQ_EMPTY_ROW (token 0). */
  const int32_t* allowed_token_masks;
  int64_t allowed_mask_stride; /* (host) int32 words between requests' masks, >= ceil(V / 32).
                                  0 = ceil(vocab_size / 32) */
} dds_sample_args;

/** Fills *args with the defaults above and args->struct_size = struct_size (pass sizeof). */
DDS_API dds_status dds_sample_args_init(dds_sample_args* args, size_t struct_size);

/** Queues one sampling step on `stream` (CUDA backend) or runs it (CPU backend). */
DDS_API dds_status dds_sample(dds_sampler* sampler, const dds_sample_args* args,
                              dds_stream stream);

/* ---------------------------------------------------------------------------------------------
 * dds_stash_logprobs: top log-probabilities of converged requests, written per slot.
 *
 * For each request r with keep[r] != 0, for its first num_valid[r] rows j (row i =
 * row_offsets[r] + j), writes entry e = 0..num_top of slot row (slot = slots[r], j):
 *   e = 0: committed_tokens[i] when given, else the argmax (ties: lower id);
 *   e >= 1: the request's own ids token_ids[r * num_top + e - 1] for e <= num_token_ids[r],
 *           else (when the request has no ids of its own, num_token_ids[r] == 0) the top-num_top
 *           tokens by log-prob, ties to the lower id; padding (requests with fewer ids than
 *           num_top, or V < num_top) is token 0 with log-prob -inf and rank 0.
 * Values: log_softmax(l / T) over finite columns (logits_mode = 0), or the tempered logits
 * l / T themselves (logits_mode = 1); T <= 0 is treated as 1. Rank of a token t: 1 + the number
 * of tokens with a strictly larger value (so ties share a rank; 1 = most likely).
 * Output element (slot, j, e) is at index (slot * rows_per_slot + j) * (num_top + 1) + e.
 * Slots of requests not kept are not touched, nor are rows j >= num_valid[r] of kept ones
 * (request_status, when given, is written for every request: 0 for those not kept).
 * ------------------------------------------------------------------------------------------- */
typedef struct dds_stash_args {
  size_t struct_size; /* sizeof(dds_stash_args), set by dds_stash_args_init */

  int32_t num_rows;           /* (host) rows, 0..max_rows */
  int32_t num_requests;       /* (host) requests, 1..max_requests */
  const int32_t* row_offsets; /* [num_requests + 1] as in dds_sample_args; NULL = 1 row each */

  const void* logits; /* [num_rows, row_stride] logits. Required */
  int32_t dtype;      /* (host) dds_dtype. Default F32 */
  int64_t row_stride; /* (host) elements between rows, >= vocab_size. 0 = vocab_size */

  const uint8_t* keep;       /* [num_requests] nonzero = stash this request. NULL = all */
  const int32_t* slots;      /* [num_requests] output slot of each request. NULL = r */
  const int32_t* num_valid;  /* [num_requests] rows to write (clamped to the request's rows and
                                to rows_per_slot; negative = 0). NULL = all rows */
  const float* temperatures; /* [num_requests] T, or NULL -> temperature */
  float temperature;         /* default T. Default 1 */
  const int32_t* committed_tokens; /* [num_rows] entry-0 token per row, or NULL = argmax */
  const int32_t* token_ids;      /* [num_requests, num_top] each request's own ids, or NULL */
  const int32_t* num_token_ids;  /* [num_requests] 0..num_top ids used per request; NULL with
                                    token_ids set = num_top each */
  int32_t num_top;       /* (host) n, 0..max_stash_width; entries per row = n + 1. Default 20 */
  int32_t logits_mode;   /* (host) 0 = log-probs, 1 = tempered logits. Default 0 */
  int32_t num_slots;     /* (host) slots in the outputs (slots[r] must be below). Required */
  int32_t rows_per_slot; /* (host) rows per slot in the outputs. Required */

  /* outputs: [num_slots, rows_per_slot, num_top + 1]; each optional but at least one given */
  int32_t* out_token_ids;
  float* out_logprobs;
  int32_t* out_ranks;
  int32_t* request_status; /* [num_requests] DDS_REQ_* bits, optional */

  /* [num_requests, allowed_mask_stride] allowed-token bitmask as in dds_sample_args, or NULL.
   * A disallowed column is -inf like a -inf logit: never in the top-n nor the argmax; as entry
   * 0 or one of the request's ids its value is -inf (rank 1 + the allowed finite columns). */
  const int32_t* allowed_token_masks;
  int64_t allowed_mask_stride; /* (host) >= ceil(vocab_size / 32); 0 = ceil(vocab_size / 32) */
} dds_stash_args;

/** Fills *args with the defaults above and args->struct_size = struct_size (pass sizeof). */
DDS_API dds_status dds_stash_args_init(dds_stash_args* args, size_t struct_size);

/** Queues (CUDA) or runs (CPU) the stash. */
DDS_API dds_status dds_stash_logprobs(dds_sampler* sampler, const dds_stash_args* args,
                                      dds_stream stream);

/* ---------------------------------------------------------------------------------------------
 * dds_reveal: which positions to commit this step (decoder primitive).
 *
 * Per row: a score (any float: confidence, margin, -entropy, or the caller's own) and an
 * eligibility flag. Per request a policy picks rows among the eligible ones; ties break by the
 * lower canvas position. `reveal[i]` is written for every row (1 = commit, 0 = not). Optionally
 * each revealed row's token is written into the caller's canvas at its position, and the EOS rule
 * applied. See docs/decoding.md for the exact rules.
 * ------------------------------------------------------------------------------------------- */
typedef enum dds_reveal_policy {
  DDS_REVEAL_TOP_N = 0,     /* the n best eligible rows (n = counts, or ceil(eligible/steps_left)) */
  DDS_REVEAL_THRESHOLD = 1, /* every eligible row with score >= threshold, at least the best one */
  DDS_REVEAL_FACTOR = 2,    /* Fast-dLLM factor rule: the n-th best while score >= 1 - f/(n+1) */
  DDS_REVEAL_RANDOM = 3,    /* n eligible rows uniformly at random (counter-based noise) */
  /* EB-sampler (Ben-Hamu et al. 2025): `scores` holds each row's entropy (nats, lower first;
   * NaN = +inf). Eligible rows in ascending entropy (ties: lower position); reveal the longest
   * prefix of length k >= 1 with sum(first k) - max(first k) <= bound (the sum of the k - 1
   * lowest entropies; a negative entropy counts as 0 in that sum; float64 sums). */
  DDS_REVEAL_ENTROPY_BOUND = 4
} dds_reveal_policy;

typedef struct dds_reveal_args {
  size_t struct_size; /* sizeof(dds_reveal_args), set by dds_reveal_args_init */
  int32_t num_rows;           /* (host) rows, 0..max_rows */
  int32_t num_requests;       /* (host) requests, 1..max_requests */
  const int32_t* row_offsets; /* [num_requests + 1] as in dds_sample_args; NULL = 1 row each */
  const int32_t* positions;   /* [num_rows] canvas position of each row; NULL = index in request */
  const float* scores;        /* [num_rows] ranking score, higher is better. Required */
  const uint8_t* eligible;    /* [num_rows] nonzero = may be revealed; NULL = all rows */

  const int32_t* policies; /* [num_requests] dds_reveal_policy, or NULL -> policy */
  int32_t policy;          /* default policy. Default DDS_REVEAL_TOP_N */
  const int32_t* counts;   /* [num_requests] n for TOP_N / RANDOM, or NULL -> count */
  int32_t count;           /* default n; n <= 0 means "use steps_left". Default 1 */
  const int32_t* steps_left; /* [num_requests] steps left: n = ceil(eligible / steps_left) when
                                n <= 0 (steps_left <= 0 counts as 1). NULL: n <= 0 reveals 1 */
  const float* thresholds;   /* [num_requests] THRESHOLD tau, or NULL -> threshold */
  float threshold;           /* default tau. Default 0.9 */
  const float* factors;      /* [num_requests] FACTOR f, or NULL -> factor */
  float factor;              /* default f. Default 1 */
  const float* position_temperatures; /* [num_requests] rank TOP_N by score/tau + Gumbel; 0 off */
  float position_temperature;         /* default. Default 0 */
  const uint64_t* seeds;  /* [num_requests] noise key (RANDOM, position temperature), or NULL */
  uint64_t seed;          /* default seed. Default 0 */
  const uint32_t* steps;  /* [num_requests] step (counter), or NULL -> step */
  uint32_t step;          /* default step. Default 0 */

  /* canvas (optional): [num_requests, canvas_stride] token ids, one canvas row per request */
  int32_t* canvas;        /* NULL: no canvas writes, no EOS rule */
  int64_t canvas_stride;  /* (host) elements between canvas rows, >= canvas_length */
  int32_t canvas_length;  /* (host) positions per canvas; rows with position outside are never
                             revealed (and flagged DDS_REQ_BAD_POSITION) */
  const int32_t* tokens;  /* [num_rows] token of each row written at its position when revealed;
                             required with canvas */
  int32_t mask_token;     /* (host) canvas value of a still-masked position (EOS rule) */
  int32_t eos_token;      /* (host) -1 = no EOS rule. Else: positions after a request's first
                             EOS in the canvas (before this step) are not eligible, and
                             finished[r] = 1 when after this step the canvas holds an EOS and no
                             position before the first EOS is masked */

  /* outputs */
  uint8_t* reveal;          /* [num_rows] 1 = revealed. Required */
  int32_t* num_revealed;    /* [num_requests] rows revealed per request, optional */
  int32_t* finished;        /* [num_requests] EOS rule result (0/1), optional */
  int32_t* request_status;  /* [num_requests] DDS_REQ_* bits, optional */

  /* ENTROPY_BOUND (appended: an older struct_size gets NULL and the default 0.1) */
  const float* entropy_bounds; /* [num_requests] EB bound (nats), or NULL -> entropy_bound */
  float entropy_bound;         /* default bound, >= 0 (+inf reveals every eligible row).
                                  Default 0.1 */
} dds_reveal_args;

#define DDS_REQ_BAD_POLICY 256    /* unknown policy: TOP_N used */
#define DDS_REQ_BAD_POSITION 512  /* a row's position is outside [0, canvas_length) */
#define DDS_REQ_TOO_MANY_ROWS 1024 /* reserved: no longer produced (the CUDA dds_reveal once
                                      limited a request to 4096 rows; it has no limit now) */
#define DDS_REQ_BAD_ROW_OFFSETS 2048 /* row_offsets[r], row_offsets[r+1] reversed or outside
                                        [0, num_rows] (or row_offsets[0] != 0 for r = 0,
                                        row_offsets[num_requests] != num_rows for the last r):
                                        the request owns no rows (docs/sampling.md §1) */
#define DDS_REQ_BAD_DRAFT_COUNT 4096 /* verify: draft_counts[r] outside [0, n]: clamped */
#define DDS_REQ_BAD_ENTROPY_BOUND 8192 /* ENTROPY_BOUND: NaN or negative bound: 0 used */
#define DDS_REQ_BAD_TOKEN_ID 16384   /* a token id read as input outside [0, vocab_size): stash
                                        committed_tokens / token_ids (written as given, value
                                        -inf, rank 0), verify draft_tokens (rejected) */
#define DDS_REQ_BAD_NUM_TOKEN_IDS 32768 /* stash: num_token_ids[r] outside [0, num_top]: clamped */
#define DDS_REQ_BAD_REVEAL_PARAM 65536  /* reveal: thresholds[r] NaN, factors[r] NaN, infinite or
                                           negative, or position_temperatures[r] NaN or negative
                                           (used as docs/sampling.md §1 says) */

DDS_API dds_status dds_reveal_args_init(dds_reveal_args* args, size_t struct_size);
DDS_API dds_status dds_reveal(dds_sampler* sampler, const dds_reveal_args* args,
                              dds_stream stream);

/* ---------------------------------------------------------------------------------------------
 * dds_verify_drafts: exact speculative verification (Leviathan et al. 2023).
 *
 * Request r drafted n_r <= num_drafts tokens d_0.. with draft distributions q_i (draft logits
 * rows) and has n_r + 1 target rows p_0..p_n. Both go through temperature and the filters of
 * dds_sample (no guidance in this version). Draft i is accepted with probability
 * min(1, p_i(d_i) / q_i(d_i)) in order; at the first rejection a token is sampled from the
 * normalised residual max(p_i - q_i, 0) (from p_i if that is all zero); if all are accepted one
 * more token is sampled from p_n. Output per request: the accepted count a and the a + 1 output
 * tokens (the accepted drafts, then the corrected or bonus token), padded with -1.
 * ------------------------------------------------------------------------------------------- */
typedef struct dds_verify_args {
  size_t struct_size; /* sizeof(dds_verify_args), set by dds_verify_args_init */
  int32_t num_requests;  /* (host) requests, 1..max_requests */
  int32_t num_drafts;    /* (host) n: drafts per request (capacity of the layouts below), >= 0 */
  const int32_t* draft_counts; /* [num_requests] n_r in [0, n], or NULL = n each (outside:
                                  clamped to [0, n], flagged DDS_REQ_BAD_DRAFT_COUNT) */
  const int32_t* draft_tokens; /* [num_requests, n] drafted token ids. Required if n > 0 */
  const void* draft_logits;    /* [num_requests * n, draft_row_stride]: row r*n + i is q_i */
  int64_t draft_row_stride;    /* (host) elements, >= vocab_size. 0 = vocab_size */
  const void* target_logits;   /* [num_requests * (n+1), target_row_stride]: row r*(n+1)+i */
  int64_t target_row_stride;   /* (host) elements, >= vocab_size. 0 = vocab_size */
  int32_t dtype;               /* (host) dds_dtype of both logits tensors. Default F32 */
  const float* temperatures;   /* [num_requests] or NULL -> temperature (0 = greedy) */
  float temperature;
  const int32_t* top_ks;
  int32_t top_k;
  const float* top_ps;
  float top_p;
  const float* min_ps;
  float min_p;
  const uint64_t* seeds;
  uint64_t seed;
  const uint32_t* steps;
  uint32_t step;
  int32_t banned_token; /* (host) -1 none */

  /* outputs */
  int32_t* accepted_counts; /* [num_requests] a in [0, n_r]. Required */
  int32_t* out_tokens;      /* [num_requests, n + 1] a + 1 tokens then -1. Required */
  float* out_logprobs;      /* [num_requests, n + 1] log p_i(token) (target, processed); padding
                               -inf. Optional */
  int32_t* request_status;  /* [num_requests] DDS_REQ_* bits, optional */

  /* [num_requests, allowed_mask_stride] allowed-token bitmask as in dds_sample_args, or NULL;
   * applies to both the draft rows and the target rows of request r (a disallowed column is
   * -inf in p_i and q_i: a disallowed draft is rejected, and never sampled). */
  const int32_t* allowed_token_masks;
  int64_t allowed_mask_stride; /* (host) >= ceil(vocab_size / 32); 0 = ceil(vocab_size / 32) */
} dds_verify_args;

DDS_API dds_status dds_verify_args_init(dds_verify_args* args, size_t struct_size);
DDS_API dds_status dds_verify_drafts(dds_sampler* sampler, const dds_verify_args* args,
                                     dds_stream stream);

#ifdef __cplusplus
} /* extern "C" */

#endif

#endif /* DDS_DDS_H_ */
