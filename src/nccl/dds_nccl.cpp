// libdds_nccl: the NCCL driver of the vocabulary-parallel protocol (include/dds/dds_nccl.h). Uses
// only libdds's public API, so libdds never depends on NCCL.
#include "dds/dds_nccl.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace {

thread_local std::string g_error;

dds_status nfail(dds_status st, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_error = buf;
  return st;
}

size_t round_up(size_t x) { return (x + 255) / 256 * 256; }

dds_status plan_of(const dds_sampler* s, const dds_sample_args* a, const dds_shard_args* sh,
                   dds_shard_plan* plan, size_t* gathered_bytes, size_t* record_bytes) {
  plan->struct_size = sizeof *plan;
  const dds_status st = dds_sample_shard_plan(s, a, sh, plan);
  if (st != DDS_OK) return st;
  size_t rec = 8;
  for (int32_t q = 0; q < plan->num_rounds; ++q)
    if ((size_t)plan->record_bytes[q] > rec) rec = (size_t)plan->record_bytes[q];
  *gathered_bytes = round_up((size_t)plan->gathered_bytes);
  *record_bytes = round_up(rec);
  return DDS_OK;
}

}  // namespace

extern "C" {

DDS_API const char* dds_nccl_last_error(void) { return g_error.c_str(); }

DDS_API dds_status dds_sample_nccl_workspace_bytes(const dds_sampler* sampler,
                                                   const dds_sample_args* args,
                                                   const dds_shard_args* shard, size_t* bytes) {
  g_error.clear();
  if (!bytes) return nfail(DDS_ERR_NULL_POINTER, "dds_sample_nccl_workspace_bytes: bytes is NULL");
  dds_shard_plan plan;
  size_t g = 0, r = 0;
  const dds_status st = plan_of(sampler, args, shard, &plan, &g, &r);
  if (st != DDS_OK) return st;
  *bytes = g + r;
  return DDS_OK;
}

DDS_API dds_status dds_sample_nccl(dds_sampler* sampler, const dds_sample_args* args,
                                   const dds_shard_args* shard, ncclComm_t comm, void* workspace,
                                   size_t workspace_bytes, dds_stream stream) {
  const char* fn = "dds_sample_nccl";
  g_error.clear();
  if (!shard) return nfail(DDS_ERR_NULL_POINTER, "%s: shard is NULL", fn);
  if (!comm) return nfail(DDS_ERR_NULL_POINTER, "%s: comm is NULL", fn);
  int32_t backend = -1;
  dds_status st = dds_sampler_backend(sampler, &backend);
  if (st != DDS_OK) return st;
  if (backend != DDS_BACKEND_CUDA)
    return nfail(DDS_ERR_UNSUPPORTED, "%s: needs a sampler on the CUDA backend", fn);
  int nranks = 0, rank = 0;
  ncclResult_t nr = ncclCommCount(comm, &nranks);
  if (nr == ncclSuccess) nr = ncclCommUserRank(comm, &rank);
  if (nr != ncclSuccess)
    return nfail(DDS_ERR_CUDA, "%s: NCCL: %s", fn, ncclGetErrorString(nr));
  if (nranks != shard->world_size || rank != shard->rank)
    return nfail(DDS_ERR_INVALID_ARGUMENT,
                 "%s: shard->rank (%d) / world_size (%d) must be the communicator's rank (%d) / "
                 "size (%d)",
                 fn, shard->rank, shard->world_size, rank, nranks);
  dds_shard_plan plan;
  size_t gbytes = 0, rbytes = 0;
  if ((st = plan_of(sampler, args, shard, &plan, &gbytes, &rbytes)) != DDS_OK) return st;
  if (args->num_rows == 0) return DDS_OK;
  if (!workspace) return nfail(DDS_ERR_NULL_POINTER, "%s: workspace is NULL", fn);
  if (workspace_bytes < gbytes + rbytes)
    return nfail(DDS_ERR_CAPACITY,
                 "%s: workspace_bytes (%zu) is less than dds_sample_nccl_workspace_bytes (%zu)", fn,
                 workspace_bytes, gbytes + rbytes);
  unsigned char* gathered = static_cast<unsigned char*>(workspace);
  unsigned char* record = gathered + gbytes;
  dds_shard_args sh = *shard;
  for (int32_t q = 0; q < plan.num_rounds; ++q) {
    sh.round = q;
    if ((st = dds_sample_partial(sampler, args, &sh, gathered, record, stream)) != DDS_OK) return st;
    nr = ncclAllGather(record, gathered + plan.gathered_offset[q], (size_t)plan.record_bytes[q],
                       ncclUint8, comm, (cudaStream_t)stream);
    if (nr != ncclSuccess)
      return nfail(DDS_ERR_CUDA, "%s: ncclAllGather (round %d): %s", fn, q, ncclGetErrorString(nr));
  }
  return dds_sample_finish(sampler, args, &sh, gathered, stream);
}

}  // extern "C"
