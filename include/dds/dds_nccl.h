/*
 * dds_nccl.h — vocabulary-parallel sampling over an NCCL communicator (optional library
 * libdds_nccl, CMake option DDS_WITH_NCCL; libdds itself never needs NCCL).
 *
 * One call runs the whole protocol of dds_shard.h on the caller's stream: every round's
 * dds_sample_partial, an ncclAllGather of the round's records into the gathered buffer, and
 * dds_sample_finish. Graph-safe as far as NCCL is (no allocation, no host synchronisation): the
 * caller provides the workspace (gathered buffer + one record), device memory of the sampler's
 * device. shard->rank must be the communicator's rank and shard->world_size its size.
 * CUDA backend only.
 */
#ifndef DDS_DDS_NCCL_H_
#define DDS_DDS_NCCL_H_

#include <nccl.h>

#include "dds/dds_shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Workspace bytes dds_sample_nccl needs for this call (plan.gathered_bytes + the largest record,
 *  rounded to 256 bytes). Host only. */
DDS_API dds_status dds_sample_nccl_workspace_bytes(const dds_sampler* sampler,
                                                   const dds_sample_args* args,
                                                   const dds_shard_args* shard, size_t* bytes);

/** Runs every round (partial + ncclAllGather) and the finish on `stream`. shard->round is
 *  ignored. On failure the message is in dds_last_error(), or for NCCL's own errors in
 *  dds_nccl_last_error(). */
DDS_API dds_status dds_sample_nccl(dds_sampler* sampler, const dds_sample_args* args,
                                   const dds_shard_args* shard, ncclComm_t comm, void* workspace,
                                   size_t workspace_bytes, dds_stream stream);

/** Message of the last failure of a dds_nccl function on this thread that was not reported by
 *  libdds ("" if none). */
DDS_API const char* dds_nccl_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DDS_DDS_NCCL_H_ */
