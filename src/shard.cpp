// Vocabulary-parallel exact sampling (include/dds/dds_shard.h, docs/vocab_parallel.md): the C ABI,
// validation, the plan, and the CPU backend's driver. The per-row logic of every round and of the
// finish lives in kernels/shard/shard.cuh, shared with the CUDA backend (src/cuda_shard.cu).
//
// Each rank holds columns [off, off + Vs) of every row. Round 0 (STATS) writes per row the
// statistics of its slice (counts, top-2 of l and of a, sum-exp and entropy terms relative to its
// own maxima), its share of the two-level sampler over the unfiltered set (best full block, the at
// most two blocks cut by its slice boundaries, each with its token winner) and, when top-k may be
// on, its top-C candidates. Rounds RADIX (4, only when top-p may be on) find the top-p threshold
// of rows whose top-p is not decided by candidates: a radix select on the 32-bit order-preserving
// key of a, one byte per round, 256 bins of (count, mass). Round KEPT (when any filter may be on)
// writes the sums and the sampler share over the filtered set, relative to the global maximum.
// The finish combines everything; every rank gets the same outputs.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "checks.h"
#include "dds/dds_shard.h"
#include "internal.h"
#include "shard_params.h"

namespace dds {

// src/cuda_shard.cu (stubs below when built without CUDA). Arguments validated and normalised.
dds_status cuda_shard_partial(const shard::Call& c, int32_t round, void* record_out, int device,
                              dds_stream stream);
dds_status cuda_shard_finish(const shard::Call& c, int device, dds_stream stream);

#if !defined(DDS_HAVE_CUDA)
dds_status cuda_shard_partial(const shard::Call&, int32_t, void*, int, dds_stream) {
  return fail(DDS_ERR_UNSUPPORTED, "dds_sample_partial: this build has no CUDA backend");
}
dds_status cuda_shard_finish(const shard::Call&, int, dds_stream) {
  return fail(DDS_ERR_UNSUPPORTED, "dds_sample_finish: this build has no CUDA backend");
}
#endif

namespace {

using shard::Cand;
using shard::KeptRec;
using shard::RadixRec;
using shard::StatsHead;

// ---------------------------------------------------------------------------------------------
// The plan (host only).
// ---------------------------------------------------------------------------------------------
struct Plan {
  int32_t num_rounds = 0;
  int32_t kind[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t row_bytes[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t record_bytes[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t offset[DDS_SHARD_MAX_ROUNDS] = {};
  int64_t total = 0;
  int32_t C = 0;  // candidates per rank and row in round 0
  int32_t first_radix = -1;
  int32_t kept_round = -1;
};

Plan make_plan(const dds_sample_args& a, const dds_shard_args& sh) {
  Plan p;
  const bool may_k = a.top_ks != nullptr || a.top_k > 0;
  const bool may_p = a.top_ps != nullptr || a.top_p < 1.f;
  const bool may_mp = a.min_ps != nullptr || a.min_p > 0.f;
  p.C = may_k ? sh.max_top_k : 0;
  auto add = [&](int32_t kind, int64_t row_bytes) {
    const int32_t q = p.num_rounds++;
    p.kind[q] = kind;
    p.row_bytes[q] = row_bytes;
    p.record_bytes[q] = row_bytes * a.num_rows;
    p.offset[q] = p.total;
    p.total += p.record_bytes[q] * sh.world_size;
  };
  add(DDS_SHARD_ROUND_STATS, (int64_t)sizeof(StatsHead) + (int64_t)sizeof(Cand) * p.C);
  if (may_p) {
    p.first_radix = p.num_rounds;
    for (int i = 0; i < shard::kRadixRounds; ++i) add(DDS_SHARD_ROUND_RADIX, sizeof(RadixRec));
  }
  if (may_k || may_p || may_mp) {
    p.kept_round = p.num_rounds;
    add(DDS_SHARD_ROUND_KEPT, sizeof(KeptRec));
  }
  return p;
}

// One call's arguments after validation.
struct Ctx {
  dds_sample_args a;
  dds_shard_args sh;
  int32_t V = 0;
  Plan plan;
  const unsigned char* gathered = nullptr;

  const StatsHead& stats(int32_t rank, int32_t row) const {
    return *reinterpret_cast<const StatsHead*>(gathered + plan.record_bytes[0] * rank +
                                               plan.row_bytes[0] * row);
  }
  shard::Call call() const {
    shard::Call c;
    std::memset(&c, 0, sizeof c);
    c.a = shard_args(a);
    c.V = V;
    c.off = sh.vocab_offset;
    c.Vs = sh.vocab_slice;
    c.rank = sh.rank;
    c.R = sh.world_size;
    c.C = plan.C;
    c.first_radix = plan.first_radix;
    c.kept_round = plan.kept_round;
    for (int q = 0; q < DDS_SHARD_MAX_ROUNDS; ++q) {
      c.row_bytes[q] = plan.row_bytes[q];
      c.record_bytes[q] = plan.record_bytes[q];
      c.offset[q] = plan.offset[q];
    }
    c.gathered = gathered;
    return c;
  }
};

// ---------------------------------------------------------------------------------------------
// The CPU driver: one row at a time.
// ---------------------------------------------------------------------------------------------
void cpu_partial(const Ctx& x, void* record_out) {
  const shard::Call c = x.call();
  const int32_t q = x.sh.round;
  unsigned char* out = static_cast<unsigned char*>(record_out);
  for (int32_t i = 0; i < x.a.num_rows; ++i) {
    unsigned char* rowp = out + x.plan.row_bytes[q] * i;
    switch (x.plan.kind[q]) {
      case DDS_SHARD_ROUND_STATS: shard::partial_stats_row(c, i, rowp); break;
      case DDS_SHARD_ROUND_RADIX: shard::partial_radix_row(c, q, i, rowp); break;
      default: shard::partial_kept_row(c, i, rowp); break;
    }
  }
}

void cpu_finish(const Ctx& x) {
  const shard::Call c = x.call();
  const dds_sample_args& a = x.a;
  std::vector<int32_t> status(a.num_requests, 0);
  for (int32_t r = 0; r < a.num_requests; ++r) status[r] = shard::call_params(c, r).status;
  for (int32_t i = 0; i < a.num_rows; ++i)
    status[shard::row_request(c.a, i)] |= shard::finish_row(c, i);
  if (a.request_status)
    for (int32_t r = 0; r < a.num_requests; ++r) a.request_status[r] = status[r];
}

// ---------------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------------
enum class Use { Plan, Partial, Finish };

bool aligned(const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

dds_status resolve_slice_stride(const char* fn, const char* name, int64_t* stride, int32_t width) {
  if (*stride == 0) *stride = width;
  if (*stride < width)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: args->%s (%lld) must be >= shard->vocab_slice (%d) or 0", fn, name,
                (long long)*stride, width);
  return DDS_OK;
}

// Validates and normalises the arguments into c (everything but `gathered`).
dds_status validate(const char* fn, const dds_sampler* s, const dds_sample_args* args,
                    const dds_shard_args* shard, Use use, Ctx* c) {
  if (!s) return fail(DDS_ERR_NULL_POINTER, "%s: sampler is NULL", fn);
  if (!args) return fail(DDS_ERR_NULL_POINTER, "%s: args is NULL", fn);
  if (!shard) return fail(DDS_ERR_NULL_POINTER, "%s: shard is NULL", fn);
  if (args->struct_size < kSampleArgsV1Size)
    return fail(DDS_ERR_STRUCT_SIZE,
                "%s: args->struct_size (%zu) is smaller than sizeof(dds_sample_args) of version 1 "
                "(%zu): call dds_sample_args_init first",
                fn, args->struct_size, kSampleArgsV1Size);
  if (shard->struct_size < sizeof(dds_shard_args))
    return fail(DDS_ERR_STRUCT_SIZE,
                "%s: shard->struct_size (%zu) is smaller than sizeof(dds_shard_args) of version 1 "
                "(%zu): call dds_shard_args_init first",
                fn, shard->struct_size, sizeof(dds_shard_args));
  dds_sample_args_init(&c->a, sizeof c->a);  // defaults for fields the caller's struct may lack
  std::memcpy(&c->a, args, args->struct_size < sizeof c->a ? args->struct_size : sizeof c->a);
  c->a.struct_size = sizeof c->a;
  dds_shard_args_init(&c->sh, sizeof c->sh);
  std::memcpy(&c->sh, shard, shard->struct_size < sizeof c->sh ? shard->struct_size : sizeof c->sh);
  c->sh.struct_size = sizeof c->sh;
  dds_sample_args& a = c->a;
  const dds_shard_args& sh = c->sh;
  const int32_t V = s->config.vocab_size;
  c->V = V;
  if (sh.world_size < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->world_size (%d) must be >= 1", fn,
                sh.world_size);
  if (sh.world_size > DDS_SHARD_MAX_WORLD_SIZE)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->world_size (%d) must be <= %d", fn,
                sh.world_size, DDS_SHARD_MAX_WORLD_SIZE);
  if (sh.rank < 0 || sh.rank >= sh.world_size)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->rank (%d) must be in [0, world_size = %d)",
                fn, sh.rank, sh.world_size);
  if (sh.vocab_slice < 1)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->vocab_slice (%d) must be >= 1", fn,
                sh.vocab_slice);
  if (sh.vocab_offset < 0 || (int64_t)sh.vocab_offset + sh.vocab_slice > V)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: shard->vocab_offset (%d) + vocab_slice (%d) must lie in [0, vocab_size = %d]",
                fn, sh.vocab_offset, sh.vocab_slice, V);
  if (sh.max_top_k < 0 || sh.max_top_k > DDS_SHARD_MAX_TOP_K)
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: shard->max_top_k (%d) must be in [0, %d]", fn,
                sh.max_top_k, DDS_SHARD_MAX_TOP_K);
  if (a.allowed_token_masks != nullptr)
    return fail(DDS_ERR_UNSUPPORTED,
                "%s: args->allowed_token_masks must be NULL: the vocabulary-parallel path does not "
                "take allowed-token masks (use dds_sample on the full row)",
                fn);
  dds_status st;
  if ((st = check_num_rows(fn, s, a.num_rows)) != DDS_OK ||
      (st = check_guidance_scale(fn, a.guidance_scale)) != DDS_OK ||
      (st = check_filters(fn, a.temperature, a.top_k, a.top_p, a.min_p)) != DDS_OK)
    return st;
  c->plan = make_plan(a, sh);
  if (c->plan.num_rounds > DDS_SHARD_MAX_ROUNDS)
    return fail(DDS_ERR_INTERNAL, "%s: plan has too many rounds", fn);
  if (use == Use::Plan || a.num_rows == 0) return DDS_OK;
  if ((st = check_requests(fn, s, a.num_requests, a.num_rows, a.row_offsets)) != DDS_OK)
    return st;
  const bool host = s->backend->host_readable();
  if ((st = debug_row_offsets(s, fn, a.row_offsets, a.num_requests, a.num_rows, nullptr)) !=
      DDS_OK)
    return st;
  const bool need_logits = use == Use::Partial || a.probs != nullptr;
  if (need_logits && a.logits == nullptr)
    return fail(DDS_ERR_NULL_POINTER, "%s: args->logits is NULL", fn);
  auto slice = [&](const char* name, int64_t* stride, int32_t) {
    return resolve_slice_stride(fn, name, stride, sh.vocab_slice);
  };
  if ((st = check_dtype(fn, "dtype", a.dtype)) != DDS_OK ||
      (st = slice("row_stride", &a.row_stride, a.num_rows)) != DDS_OK ||
      (st = check_uncond(fn, &a, slice)) != DDS_OK ||
      (st = check_banned_token(fn, a.banned_token, V)) != DDS_OK ||
      (st = check_stats(fn, a.stats)) != DDS_OK || (st = check_probs(fn, &a, slice)) != DDS_OK ||
      (use == Use::Finish && (st = check_sample_outputs(fn, a)) != DDS_OK) ||
      (st = check_sample_ptrs(*s->backend, fn, a)) != DDS_OK)
    return st;
  // The top-k cap (host-readable arrays on the CPU backend).
  auto bad_k = [&](int32_t k) { return k > 0 && k > sh.max_top_k && k < V; };
  if (bad_k(a.top_k))
    return fail(DDS_ERR_UNSUPPORTED,
                "%s: args->top_k (%d) exceeds shard->max_top_k (%d): vocabulary-parallel top-k "
                "needs k <= max_top_k (at most %d) or k >= vocab_size (off)",
                fn, a.top_k, sh.max_top_k, DDS_SHARD_MAX_TOP_K);
  if (a.top_ks && host)
    for (int32_t r = 0; r < a.num_requests; ++r)
      if (bad_k(a.top_ks[r]))
        return fail(DDS_ERR_UNSUPPORTED,
                    "%s: args->top_ks[%d] (request %d) = %d exceeds shard->max_top_k (%d): "
                    "vocabulary-parallel top-k needs k <= max_top_k (at most %d) or k >= "
                    "vocab_size (off)",
                    fn, r, r, a.top_ks[r], sh.max_top_k, DDS_SHARD_MAX_TOP_K);
  if (use == Use::Partial && (sh.round < 0 || sh.round >= c->plan.num_rounds))
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: shard->round (%d) must be in [0, num_rounds = %d) (see dds_sample_shard_plan)",
                fn, sh.round, c->plan.num_rounds);
  return DDS_OK;
}

// Checks the round-0 headers of every rank (magic, slices partitioning [0, V)) and sets
// nothing else (the rank order is derived per row from the same headers).
dds_status check_gathered(const char* fn, Ctx* c) {
  if (c->gathered == nullptr)
    return fail(DDS_ERR_NULL_POINTER, "%s: gathered is NULL (it must hold the all-gathered "
                "records of the earlier rounds)", fn);
  if (!aligned(c->gathered, 8))
    return fail(DDS_ERR_INVALID_ARGUMENT, "%s: gathered (%p) must be aligned to 8 bytes", fn,
                (const void*)c->gathered);
  const int32_t R = c->sh.world_size;
  std::vector<std::pair<int32_t, int32_t>> sl(R);
  for (int32_t r = 0; r < R; ++r) {
    const StatsHead& h = c->stats(r, 0);
    if (h.magic != shard::kMagic)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: gathered: rank %d's round-0 record of row 0 has no dds record header "
                  "(magic 0x%08x): the buffer is not the all-gather of dds_sample_partial round 0 "
                  "laid out as dds_sample_shard_plan says",
                  fn, r, h.magic);
    for (int32_t i = 1; i < c->a.num_rows; ++i) {
      const StatsHead& hi = c->stats(r, i);
      if (hi.magic != shard::kMagic || hi.vocab_offset != h.vocab_offset ||
          hi.vocab_slice != h.vocab_slice)
        return fail(DDS_ERR_INVALID_ARGUMENT,
                    "%s: gathered: rank %d's round-0 record of row %d does not match its row 0 "
                    "(wrong layout or num_rows)",
                    fn, r, i);
    }
    sl[r] = {h.vocab_offset, h.vocab_slice};
  }
  if (sl[c->sh.rank].first != c->sh.vocab_offset || sl[c->sh.rank].second != c->sh.vocab_slice)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: gathered: the record of rank %d (this rank) has slice [%d, +%d) but shard "
                "says [%d, +%d)",
                fn, c->sh.rank, sl[c->sh.rank].first, sl[c->sh.rank].second, c->sh.vocab_offset,
                c->sh.vocab_slice);
  std::vector<int32_t> order(R);
  for (int32_t r = 0; r < R; ++r) order[r] = r;
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return sl[x].first < sl[y].first; });
  int64_t next = 0;
  for (int32_t r : order) {
    if (sl[r].first != next)
      return fail(DDS_ERR_INVALID_ARGUMENT,
                  "%s: the ranks' slices must partition [0, vocab_size = %d): rank %d starts at "
                  "%d, expected %lld",
                  fn, c->V, r, sl[r].first, (long long)next);
    next += sl[r].second;
  }
  if (next != c->V)
    return fail(DDS_ERR_INVALID_ARGUMENT,
                "%s: the ranks' slices must partition [0, vocab_size = %d): they end at %lld", fn,
                c->V, (long long)next);
  return DDS_OK;
}

// dds_sample_partial / dds_sample_finish: sampler not NULL, hold it (Busy), validate, then
// run(c) unless there are no rows.
template <typename Run>
dds_status shard_entry(const char* fn, dds_sampler* s, const dds_sample_args* args,
                       const dds_shard_args* shard, Use use, Run&& run) {
  return entry(fn, [&]() -> dds_status {
    if (!s) return fail(DDS_ERR_NULL_POINTER, "%s: sampler is NULL", fn);
    return exclusive(fn, s, [&]() -> dds_status {
      Ctx c;
      dds_status st = validate(fn, s, args, shard, use, &c);
      if (st != DDS_OK || c.a.num_rows == 0) return st;
      return run(c);
    });
  });
}

}  // namespace
}  // namespace dds

using dds::fail;

extern "C" {

DDS_API dds_status dds_shard_args_init(dds_shard_args* shard, size_t struct_size) {
  dds_shard_args d;
  std::memset(&d, 0, sizeof d);
  d.rank = 0;
  d.world_size = 1;
  d.vocab_offset = 0;
  d.vocab_slice = 0;
  d.max_top_k = 64;
  d.round = 0;
  return dds::init_struct("dds_shard_args_init", "shard", shard, struct_size, d);
}

DDS_API dds_status dds_sample_shard_plan(const dds_sampler* sampler, const dds_sample_args* args,
                                         const dds_shard_args* shard, dds_shard_plan* plan) {
  const char* fn = "dds_sample_shard_plan";
  return dds::entry(fn, [&]() -> dds_status {
    if (!plan) return fail(DDS_ERR_NULL_POINTER, "%s: plan is NULL", fn);
    if (plan->struct_size < sizeof(dds_shard_plan))
      return fail(DDS_ERR_STRUCT_SIZE,
                  "%s: plan->struct_size (%zu) must be set to sizeof(dds_shard_plan) (%zu)", fn,
                  plan->struct_size, sizeof(dds_shard_plan));
    dds::Ctx c;
    dds_status st = dds::validate(fn, sampler, args, shard, dds::Use::Plan, &c);
    if (st != DDS_OK) return st;
    const size_t sz = plan->struct_size;
    std::memset(plan, 0, sizeof(dds_shard_plan));
    plan->struct_size = sz;
    plan->num_rounds = c.plan.num_rounds;
    plan->world_size = c.sh.world_size;
    for (int32_t q = 0; q < c.plan.num_rounds; ++q) {
      plan->round_kind[q] = c.plan.kind[q];
      plan->row_bytes[q] = c.plan.row_bytes[q];
      plan->record_bytes[q] = c.plan.record_bytes[q];
      plan->gathered_offset[q] = c.plan.offset[q];
    }
    plan->gathered_bytes = c.plan.total;
    return DDS_OK;
  });
}

DDS_API dds_status dds_sample_record_bytes(const dds_sampler* sampler,
                                           const dds_sample_args* args,
                                           const dds_shard_args* shard, int32_t round,
                                           size_t* bytes) {
  const char* fn = "dds_sample_record_bytes";
  return dds::entry(fn, [&]() -> dds_status {
    if (!bytes) return fail(DDS_ERR_NULL_POINTER, "%s: bytes is NULL", fn);
    dds::Ctx c;
    dds_status st = dds::validate(fn, sampler, args, shard, dds::Use::Plan, &c);
    if (st != DDS_OK) return st;
    if (round < 0 || round >= c.plan.num_rounds)
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: round (%d) must be in [0, num_rounds = %d)", fn,
                  round, c.plan.num_rounds);
    *bytes = (size_t)c.plan.record_bytes[round];
    return DDS_OK;
  });
}

DDS_API dds_status dds_sample_partial(dds_sampler* sampler, const dds_sample_args* args,
                                      const dds_shard_args* shard, const void* gathered,
                                      void* record_out, dds_stream stream) {
  const char* fn = "dds_sample_partial";
  return dds::shard_entry(fn, sampler, args, shard, dds::Use::Partial, [&](dds::Ctx& c) {
    dds_status st;
    if (!record_out) return fail(DDS_ERR_NULL_POINTER, "%s: record_out is NULL", fn);
    if (!dds::aligned(record_out, 8))
      return fail(DDS_ERR_INVALID_ARGUMENT, "%s: record_out (%p) must be aligned to 8 bytes", fn,
                  record_out);
    if ((st = sampler->backend->check_pointer(record_out, fn, "record_out")) != DDS_OK) return st;
    if (gathered && (st = sampler->backend->check_pointer(gathered, fn, "gathered")) != DDS_OK)
      return st;
    c.gathered = static_cast<const unsigned char*>(gathered);
    if (c.sh.round > 0) {
      if (!c.gathered)
        return fail(DDS_ERR_NULL_POINTER,
                    "%s: gathered is NULL (round %d needs the all-gathered records of the earlier "
                    "rounds)",
                    fn, c.sh.round);
      if (sampler->backend->host_readable() && (st = dds::check_gathered(fn, &c)) != DDS_OK)
        return st;
    }
    if (!sampler->backend->host_readable())
      return dds::cuda_shard_partial(c.call(), c.sh.round, record_out, sampler->config.device,
                                     stream);
    dds::cpu_partial(c, record_out);
    return DDS_OK;
  });
}

DDS_API dds_status dds_sample_finish(dds_sampler* sampler, const dds_sample_args* args,
                                     const dds_shard_args* shard, const void* gathered,
                                     dds_stream stream) {
  const char* fn = "dds_sample_finish";
  return dds::shard_entry(fn, sampler, args, shard, dds::Use::Finish, [&](dds::Ctx& c) {
    dds_status st;
    c.gathered = static_cast<const unsigned char*>(gathered);
    if (!c.gathered)
      return fail(DDS_ERR_NULL_POINTER,
                  "%s: gathered is NULL (it must hold the all-gathered records of every round)", fn);
    if ((st = sampler->backend->check_pointer(gathered, fn, "gathered")) != DDS_OK) return st;
    if (!sampler->backend->host_readable())
      return dds::cuda_shard_finish(c.call(), sampler->config.device, stream);
    if ((st = dds::check_gathered(fn, &c)) != DDS_OK) return st;
    dds::cpu_finish(c);
    return DDS_OK;
  });
}

}  // extern "C"
