/*
 * dds_shard.h — vocabulary-parallel (tensor-parallel LM head) exact sampling.
 *
 * Pure C99, includes dds.h. Each of R ranks holds logits [rows, vocab_slice] for the global
 * columns [vocab_offset, vocab_offset + vocab_slice) of the full vocabulary V (the sampler's
 * vocab_size). Instead of all-gathering the logits, every rank writes a small fixed-size record
 * per row, the caller all-gathers the records with its own communicator, and every rank finishes
 * every row identically. The tokens equal those of dds_sample on the unsharded rows (except
 * counted near-ties of float64 block sums), the statistics agree within 1e-6 relative.
 *
 * The protocol (rounds, byte layout of the records, caps) is in docs/vocab_parallel.md.
 *
 *   dds_sample_shard_plan(s, args, shard, &plan);          host only: rounds and buffer sizes
 *   for (q = 0; q < plan.num_rounds; ++q) {
 *     shard.round = q;
 *     dds_sample_partial(s, args, &shard, gathered, my_record, stream);
 *     all-gather my_record (plan.record_bytes[q] bytes per rank) into
 *       gathered + plan.gathered_offset[q]  (rank-major: rank i's record at i * record_bytes[q])
 *   }
 *   dds_sample_finish(s, args, &shard, gathered, stream);   writes args' outputs on every rank
 *
 * Every rank passes the same dds_sample_args (the same per-request values, num_rows, layout,
 * outputs it wants) except the logits / uncond_logits pointers and strides (its slice, row_stride
 * >= vocab_slice) and probs (its slice of the probability rows, probs_row_stride >= vocab_slice),
 * and the same dds_shard_args except rank, vocab_offset, vocab_slice and round.
 *
 * Backends: CPU (the reference) and CUDA (one CTA per row and round, a warp per 1024-id block of
 * the slice, no workspace, graph-safe; see docs/vocab_parallel.md §8). With the CUDA backend
 * every pointer (logits, outputs, gathered, record_out) is device memory of the sampler's device.
 */
#ifndef DDS_DDS_SHARD_H_
#define DDS_DDS_SHARD_H_

#include "dds/dds.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most candidates a rank sends per row for top-k (the top-k cap). */
#define DDS_SHARD_MAX_TOP_K 1024
/** Most ranks (world_size) of one call. */
#define DDS_SHARD_MAX_WORLD_SIZE 64
/** Most exchange rounds of one call (dds_shard_plan arrays are this long). */
#define DDS_SHARD_MAX_ROUNDS 8

/** Kinds of rounds (dds_shard_plan.round_kind). */
typedef enum dds_shard_round_kind {
  DDS_SHARD_ROUND_STATS = 0, /* round 0: statistics, sampler share over the unfiltered set,
                                top-k candidates */
  DDS_SHARD_ROUND_RADIX = 1, /* top-p threshold: a 256-bin histogram of one byte of the key */
  DDS_SHARD_ROUND_KEPT = 2   /* sums and sampler share over the filtered set */
} dds_shard_round_kind;

typedef struct dds_shard_args {
  size_t struct_size;   /* sizeof(dds_shard_args), set by dds_shard_args_init */
  int32_t rank;         /* (host) this rank's index in the all-gather, 0..world_size-1 */
  int32_t world_size;   /* (host) R ranks, 1..DDS_SHARD_MAX_WORLD_SIZE. Default 1 */
  int32_t vocab_offset; /* (host) first global column of this rank's slice. Default 0 */
  int32_t vocab_slice;  /* (host) columns of this rank's slice, >= 1. Required (default 0). The
                           slices of all ranks must partition [0, vocab_size) (checked in finish) */
  int32_t max_top_k;    /* (host) top-k candidates per rank and row, 0..DDS_SHARD_MAX_TOP_K; every
                           request's k must be 0 (off), <= max_top_k, or >= vocab_size (off),
                           else DDS_ERR_UNSUPPORTED. Only used (and only costs record bytes) when
                           top-k may be on (top_ks given or top_k > 0). The CUDA backend cannot
                           read top_ks on the host: there a k above the cap is taken as max_top_k
                           and flagged DDS_REQ_BAD_TOP_K. Default 64 */
  int32_t round;        /* (host) which round dds_sample_partial computes, 0..num_rounds-1 */
} dds_shard_args;

/** Fills *shard with the defaults above and shard->struct_size = struct_size (pass sizeof). */
DDS_API dds_status dds_shard_args_init(dds_shard_args* shard, size_t struct_size);

/** The rounds of one call and the sizes of its buffers (all in bytes). */
typedef struct dds_shard_plan {
  size_t struct_size;  /* sizeof(dds_shard_plan): set by the caller before dds_sample_shard_plan */
  int32_t num_rounds;  /* 1..DDS_SHARD_MAX_ROUNDS partial rounds (each followed by an all-gather) */
  int32_t world_size;  /* R, copied from the shard args */
  int32_t round_kind[DDS_SHARD_MAX_ROUNDS];    /* dds_shard_round_kind of each round */
  int64_t row_bytes[DDS_SHARD_MAX_ROUNDS];     /* record bytes per row of each round */
  int64_t record_bytes[DDS_SHARD_MAX_ROUNDS];  /* one rank's record of each round
                                                  (= num_rows * row_bytes) */
  int64_t gathered_offset[DDS_SHARD_MAX_ROUNDS]; /* where round q's gathered records start */
  int64_t gathered_bytes; /* size of the whole gathered buffer: sum of R * record_bytes[q] */
} dds_shard_plan;

/** Host only (reads no device memory): the rounds and buffer sizes of this call. The plan depends
 *  only on host-visible values (num_rows, which per-request arrays are given, the scalar filter
 *  defaults, world_size, max_top_k), so it is the same on every rank and a captured CUDA graph can
 *  replay it. plan->struct_size must be set (sizeof(dds_shard_plan)). */
DDS_API dds_status dds_sample_shard_plan(const dds_sampler* sampler, const dds_sample_args* args,
                                         const dds_shard_args* shard, dds_shard_plan* plan);

/** Bytes of this rank's record of round `round` (num_rows * row bytes) into *bytes. */
DDS_API dds_status dds_sample_record_bytes(const dds_sampler* sampler,
                                           const dds_sample_args* args,
                                           const dds_shard_args* shard, int32_t round,
                                           size_t* bytes);

/** Round shard->round of this rank: reads its logits slice (and uncond slice), and for rounds
 *  >= 1 the gathered records of all earlier rounds (`gathered`, laid out as the plan says; may be
 *  NULL for round 0), and writes its record of this round to record_out
 *  (plan.record_bytes[round] bytes, 8-byte aligned). Writes none of args' outputs. */
DDS_API dds_status dds_sample_partial(dds_sampler* sampler, const dds_sample_args* args,
                                      const dds_shard_args* shard, const void* gathered,
                                      void* record_out, dds_stream stream);

/** After the last round's all-gather: writes args' outputs (tokens, logprobs, argmax, confidence,
 *  margin, entropy, request_status: whole rows, identical on every rank; probs: this rank's slice
 *  of each probability row) from the gathered records of all rounds. Needs the logits slice only
 *  when probs is requested. */
DDS_API dds_status dds_sample_finish(dds_sampler* sampler, const dds_sample_args* args,
                                     const dds_shard_args* shard, const void* gathered,
                                     dds_stream stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DDS_DDS_SHARD_H_ */
