// GPU tests of dds_stash_logprobs (CUDA backend) against the CPU backend (the oracle,
// docs/sampling.md §7): V in {7, 1025, 32001, 262144} x n in {0, 1, 5, 20} x with/without ids x
// logits mode, every dtype, strided rows, ragged requests, mostly-skipped batches, duplicate
// logits (ties), -inf / NaN / +inf columns, committed tokens (some out of range), bad slots and
// temperatures, num_valid clamping; poisoned outputs (slots of requests not kept stay poisoned);
// large n (row split + merge for n > 32 and n = 1024); graph capture and replay with changed keep
// flags and temperatures.
#include "gpu_main.h"  // first: doctest implementation + main that skips without a device

#include <dds/dds.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dtype.h"
#include "sample_problem.h"  // esz, put_value, make_sampler, Bound, kInf

namespace {

constexpr int32_t kPoisonTok = -777;
constexpr int32_t kPoisonRank = -999;

struct StashProblem {
  int32_t V = 0, rows = 0, R = 0, dtype = DDS_DTYPE_F32, n = 0;
  int64_t stride = 0;
  int32_t num_slots = 0, rows_per_slot = 0, logits_mode = 0;
  std::vector<uint8_t> logits;
  std::vector<int32_t> offs, slots, nvalid, committed, ids, nids;
  std::vector<uint8_t> keep;
  std::vector<float> T;
  float temperature = 1.f;
  bool use_offs = true, use_keep = true, use_slots = true, use_nvalid = true, use_T = true;
  bool use_committed = false, use_ids = false, use_nids = false;
  bool want_tok = true, want_val = true, want_rank = true, want_status = true;
  std::vector<int32_t> mask;  // allowed-token masks [R, mask_stride] (empty: none)
  int64_t mask_stride = 0;
};

struct Out {
  std::vector<int32_t> tok, rank, status;
  std::vector<float> val;
};

void poison(Out& o, const StashProblem& pb) {
  const size_t N = (size_t)pb.num_slots * pb.rows_per_slot * (pb.n + 1);
  o.tok.assign(N, kPoisonTok);
  o.rank.assign(N, kPoisonRank);
  o.val.assign(N, std::numeric_limits<float>::quiet_NaN());
  o.status.assign(pb.R, -5);
}

dds_stash_args make_args(const StashProblem& pb, Bound& b) {
  dds_stash_args a;
  REQUIRE(dds_stash_args_init(&a, sizeof a) == DDS_OK);
  a.num_rows = pb.rows;
  a.num_requests = pb.R;
  a.row_offsets = pb.use_offs ? b.put(pb.offs) : nullptr;
  a.logits = b.put(pb.logits);
  a.dtype = pb.dtype;
  a.row_stride = pb.stride;
  a.keep = pb.use_keep ? b.put(pb.keep) : nullptr;
  a.slots = pb.use_slots ? b.put(pb.slots) : nullptr;
  a.num_valid = pb.use_nvalid ? b.put(pb.nvalid) : nullptr;
  a.temperatures = pb.use_T ? b.put(pb.T) : nullptr;
  a.temperature = pb.temperature;
  a.committed_tokens = pb.use_committed ? b.put(pb.committed) : nullptr;
  a.token_ids = pb.use_ids ? b.put(pb.ids) : nullptr;
  a.num_token_ids = pb.use_ids && pb.use_nids ? b.put(pb.nids) : nullptr;
  a.num_top = pb.n;
  a.logits_mode = pb.logits_mode;
  a.num_slots = pb.num_slots;
  a.rows_per_slot = pb.rows_per_slot;
  if (!pb.mask.empty()) {
    a.allowed_token_masks = b.put(pb.mask);
    a.allowed_mask_stride = pb.mask_stride;
  }
  return a;
}

Out run(dds_sampler* s, const StashProblem& pb, bool device) {
  Bound b(device);
  Out o;
  poison(o, pb);
  dds_stash_args a = make_args(pb, b);
  int32_t* dtok = pb.want_tok ? b.put(o.tok) : nullptr;
  float* dval = pb.want_val ? b.put(o.val) : nullptr;
  int32_t* drank = pb.want_rank ? b.put(o.rank) : nullptr;
  int32_t* dstat = pb.want_status ? b.put(o.status) : nullptr;
  a.out_token_ids = dtok;
  a.out_logprobs = dval;
  a.out_ranks = drank;
  a.request_status = dstat;
  const dds_status st = dds_stash_logprobs(s, &a, nullptr);
  INFO(dds_last_error());
  REQUIRE(st == DDS_OK);
  if (device) {
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    if (pb.want_tok) b.get(o.tok, dtok);
    if (pb.want_val) b.get(o.val, dval);
    if (pb.want_rank) b.get(o.rank, drank);
    if (pb.want_status) b.get(o.status, dstat);
  }
  return o;
}

bool close_value(float g, float c) {
  if (std::isnan(c)) return std::isnan(g);
  if (std::isinf(c) || std::isinf(g)) return g == c;
  return std::fabs((double)g - (double)c) <= 1e-6 + 1e-5 * std::fabs((double)c);
}

// Compares every output element (poison included: untouched elements must stay poisoned).
int compare(const Out& g, const Out& c, const StashProblem& pb, const char* what) {
  int bad = 0;
  const int E = pb.n + 1;
  for (size_t x = 0; x < c.tok.size(); ++x) {
    const bool ok = (!pb.want_tok || g.tok[x] == c.tok[x]) &&
                    (!pb.want_rank || g.rank[x] == c.rank[x]) &&
                    (!pb.want_val || close_value(g.val[x], c.val[x]));
    if (!ok && bad++ < 8)
      MESSAGE(what << ": element " << x << " (slot-row " << x / E << ", entry " << x % E
                   << "): gpu (" << g.tok[x] << ", " << g.val[x] << ", " << g.rank[x]
                   << ") cpu (" << c.tok[x] << ", " << c.val[x] << ", " << c.rank[x] << ")");
  }
  if (pb.want_status)
    for (int r = 0; r < pb.R; ++r)
      if (g.status[r] != c.status[r] && bad++ < 8)
        MESSAGE(what << ": request_status[" << r << "] gpu " << g.status[r] << " cpu "
                     << c.status[r]);
  return bad;
}

enum Flavor { kNormal = 0, kTies = 1, kSpecial = 2 };

// Fills a problem: ragged requests, random keep / slots / num_valid / temperatures.
StashProblem make_problem(std::mt19937_64& rng, int32_t V, int32_t rows, int32_t R, int32_t dtype,
                     int32_t n, int64_t pad, int keep_one_in, Flavor fl) {
  StashProblem pb;
  pb.V = V;
  pb.rows = rows;
  pb.R = R;
  pb.dtype = dtype;
  pb.n = n;
  pb.stride = V + pad;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  pb.logits.assign((size_t)rows * pb.stride * esz(dtype), 0);
  for (int32_t i = 0; i < rows; ++i) {
    const float sigma = 1.f + 6.f * ud(rng);
    for (int64_t t = 0; t < pb.stride; ++t) {
      float v = sigma * nd(rng);
      if (fl == kTies) v = std::round(v * 2.f) / 2.f;  // few distinct values: many ties
      if (fl == kSpecial) {
        const float u = ud(rng);
        if (u < 0.05f) v = -kInf;
        else if (u < 0.06f) v = std::numeric_limits<float>::quiet_NaN();
      }
      if (t >= V) v = 12345.f;  // padding between rows must never be read as a column
      put_value(pb.logits, dtype, (size_t)(i * pb.stride + t), v);
    }
    if (fl == kSpecial && i % 3 == 1) put_value(pb.logits, dtype, (size_t)(i * pb.stride + (i * 7) % V), kInf);
    if (fl == kSpecial && i % 5 == 2)  // an all -inf row
      for (int32_t t = 0; t < V; ++t) put_value(pb.logits, dtype, (size_t)(i * pb.stride + t), -kInf);
  }
  // ragged offsets: R requests over rows
  pb.offs.assign(R + 1, 0);
  {
    std::vector<int32_t> cuts;
    for (int32_t r = 1; r < R; ++r) cuts.push_back((int32_t)(rng() % (rows + 1)));
    std::sort(cuts.begin(), cuts.end());
    for (int32_t r = 1; r < R; ++r) pb.offs[r] = cuts[r - 1];
    pb.offs[R] = rows;
  }
  int32_t max_rows_req = 0;
  for (int32_t r = 0; r < R; ++r) max_rows_req = std::max(max_rows_req, pb.offs[r + 1] - pb.offs[r]);
  pb.rows_per_slot = std::max(1, max_rows_req - (int)(rng() % 2));  // sometimes clamps
  pb.num_slots = R + 2;
  pb.slots.resize(R);
  std::vector<int32_t> perm(pb.num_slots);
  for (int32_t s = 0; s < pb.num_slots; ++s) perm[s] = s;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int32_t r = 0; r < R; ++r) pb.slots[r] = perm[r];
  if (R > 3) pb.slots[R / 2] = (rng() % 2) ? -1 : pb.num_slots;  // a bad slot
  pb.keep.resize(R);
  for (int32_t r = 0; r < R; ++r) pb.keep[r] = (rng() % keep_one_in) == 0 ? (uint8_t)(1 + rng() % 200) : 0;
  pb.keep[rng() % R] = 1;
  pb.nvalid.resize(R);
  for (int32_t r = 0; r < R; ++r) {
    const int32_t nr = pb.offs[r + 1] - pb.offs[r];
    const int32_t u = (int32_t)(rng() % 8);
    pb.nvalid[r] = u == 0 ? -3 : u == 1 ? nr + 5 : u < 5 ? nr : (nr > 0 ? (int32_t)(rng() % (nr + 1)) : 0);
  }
  const float temps[] = {1.f, 1.f, 0.7f, 1.3f, 0.f, -1.f, std::numeric_limits<float>::quiet_NaN(), 2.5f};
  pb.T.resize(R);
  for (int32_t r = 0; r < R; ++r) pb.T[r] = temps[rng() % 8];
  pb.committed.resize(rows);
  for (int32_t i = 0; i < rows; ++i) {
    const uint64_t u = rng() % 16;
    pb.committed[i] = u == 0 ? -1 : u == 1 ? V : (int32_t)(rng() % V);
  }
  pb.ids.resize((size_t)R * std::max(n, 1));
  for (auto& x : pb.ids) {
    const uint64_t u = rng() % 20;
    x = u == 0 ? -2 : u == 1 ? V + 3 : (int32_t)(rng() % V);
  }
  if (n > 1 && R > 0) pb.ids[1] = pb.ids[0];  // a duplicate id
  pb.nids.resize(R);
  for (int32_t r = 0; r < R; ++r) pb.nids[r] = n > 0 ? (int32_t)(rng() % (n + 2)) - (r == 0 ? 1 : 0) : 0;
  if (R > 1) pb.nids[1] = 0;  // a request without ids of its own: top-n
  return pb;
}

int check(dds_sampler* cpu, dds_sampler* gpu, const StashProblem& pb, const char* what) {
  const Out c = run(cpu, pb, false);
  const Out g = run(gpu, pb, true);
  return compare(g, c, pb, what);
}

}  // namespace

TEST_CASE("stash parity: V x n x ids x logits mode x dtype (strided rows, ragged requests)") {
  const int32_t Vs[] = {7, 1025, 32001, 262144};
  const int32_t ns[] = {0, 1, 5, 20};
  std::mt19937_64 rng(1234);
  int total_bad = 0, cases = 0;
  for (int32_t V : Vs) {
    const int32_t rows = V >= 262144 ? 5 : V >= 32001 ? 24 : 61;
    const int32_t R = V >= 262144 ? 3 : V >= 32001 ? 7 : 17;
    dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 20);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 20);
    int combo = 0;
    for (int32_t n : ns)
      for (int ids = 0; ids < 2; ++ids)
        for (int lm = 0; lm < 2; ++lm, ++combo) {
          const int32_t dtype = combo % 3;
          const Flavor fl = (Flavor)(combo % 3 == 2 ? kSpecial : combo % 4 == 1 ? kTies : kNormal);
          const int64_t pad = (combo % 2) ? (V % 2 ? 3 : 5) : 0;
          StashProblem pb = make_problem(rng, V, rows, R, dtype, n, pad, 2, fl);
          pb.logits_mode = lm;
          pb.use_ids = ids;
          pb.use_nids = ids && (combo % 4 != 3);
          pb.use_committed = (combo % 3 == 1);
          pb.use_T = combo % 5 != 4;
          pb.temperature = 0.9f;
          pb.use_keep = combo % 7 != 3;
          char what[160];
          std::snprintf(what, sizeof what, "V=%d n=%d ids=%d logits_mode=%d dtype=%d flavor=%d pad=%lld committed=%d",
                        V, n, ids, lm, dtype, (int)fl, (long long)pad, (int)pb.use_committed);
          const int bad = check(cpu, gpu, pb, what);
          CHECK_MESSAGE(bad == 0, what);
          total_bad += bad;
          ++cases;
        }
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
  MESSAGE("parity sweep: " << cases << " cases, " << total_bad << " mismatches");
}

TEST_CASE("stash: allowed-token masks (dense, sparse, all-zero) equal to the CPU") {
  std::mt19937_64 rng(4321);
  int total_bad = 0, cases = 0;
  for (int32_t V : {1025, 32001, 262144}) {
    const int32_t rows = V >= 262144 ? 5 : 24, R = V >= 262144 ? 3 : 7;
    dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 20);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 20);
    int combo = 0;
    for (int32_t n : {1, 5, 20})
      for (int variant = 0; variant < 3; ++variant, ++combo) {
        const int32_t dtype = combo % 3;
        StashProblem pb = make_problem(rng, V, rows, R, dtype, n, combo % 2 ? 3 : 0, 2, kNormal);
        pb.use_ids = variant == 1;
        pb.use_nids = variant == 1;
        pb.use_committed = variant == 2;
        pb.logits_mode = combo % 4 == 3;
        // Each column allowed with probability 0.7 (dense) or 0.01 (sparse); request 1 none.
        const float density = combo % 2 ? 0.01f : 0.7f;
        const int64_t words = (V + 31) / 32;
        pb.mask_stride = words + 1;
        pb.mask.assign((size_t)R * pb.mask_stride, 0);
        std::uniform_real_distribution<float> ud(0.f, 1.f);
        for (int32_t r = 0; r < R; ++r)
          for (int64_t w = 0; w < pb.mask_stride; ++w) {
            uint32_t bits = 0;
            for (int b = 0; b < 32; ++b)
              if (r != 1 && ud(rng) < density) bits |= 1u << b;
            pb.mask[(size_t)r * pb.mask_stride + w] = (int32_t)bits;
          }
        char what[160];
        std::snprintf(what, sizeof what, "masks V=%d n=%d variant=%d dtype=%d density=%g", V, n,
                      variant, dtype, density);
        const int bad = check(cpu, gpu, pb, what);
        CHECK_MESSAGE(bad == 0, what);
        total_bad += bad;
        ++cases;
      }
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
  MESSAGE("mask sweep: " << cases << " cases, " << total_bad << " mismatches");
}

TEST_CASE("stash: mostly-skipped batch (1 in 16 kept), defaults (NULL arrays), partial outputs") {
  std::mt19937_64 rng(99);
  const int32_t V = 32001, rows = 300, R = 300;
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 20);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 20);
  for (int variant = 0; variant < 4; ++variant) {
    StashProblem pb = make_problem(rng, V, rows, R, variant % 2 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32,
                              variant < 2 ? 5 : 20, 0, 16, kNormal);
    pb.use_offs = false;  // one row per request
    pb.rows_per_slot = 1;
    pb.use_nvalid = variant != 1;
    pb.use_slots = variant != 2;
    if (!pb.use_slots) {
      pb.num_slots = R;
    }
    pb.use_T = variant == 3;
    pb.want_rank = variant != 2;
    pb.want_tok = variant != 3;
    pb.want_status = variant != 1;
    char what[64];
    std::snprintf(what, sizeof what, "skipped batch variant %d", variant);
    CHECK(check(cpu, gpu, pb, what) == 0);
  }
  // keep = NULL: every request kept
  StashProblem pb = make_problem(rng, V, rows, R, DDS_DTYPE_BF16, 20, 0, 1, kTies);
  pb.use_keep = false;
  pb.use_offs = false;
  pb.rows_per_slot = 1;
  CHECK(check(cpu, gpu, pb, "keep NULL, 300 rows") == 0);
  dds_destroy(cpu);
  dds_destroy(gpu);
}

TEST_CASE("stash: large n (33, 64, 100, 1024) with split rows and merges") {
  std::mt19937_64 rng(7);
  const int32_t V = 32001, rows = 9, R = 4;
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 1024);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 1024);
  const int32_t ns[] = {33, 64, 100, 1024};
  int c = 0;
  for (int32_t n : ns)
    for (int ids = 0; ids < 2; ++ids, ++c) {
      StashProblem pb = make_problem(rng, V, rows, R, c % 3, n, c % 2, 1, c % 2 ? kTies : kNormal);
      pb.use_ids = ids;
      pb.use_nids = true;
      pb.use_committed = c % 3 == 0;
      char what[64];
      std::snprintf(what, sizeof what, "n=%d ids=%d", n, ids);
      CHECK(check(cpu, gpu, pb, what) == 0);
    }
  // a big vocabulary with large n (many partials merged)
  {
    dds_sampler* cpu2 = make_sampler(DDS_BACKEND_CPU, 262144, 2, 2, 1024);
    dds_sampler* gpu2 = make_sampler(DDS_BACKEND_CUDA, 262144, 2, 2, 1024);
    StashProblem pb = make_problem(rng, 262144, 2, 2, DDS_DTYPE_BF16, 300, 0, 1, kNormal);
    pb.use_slots = false;
    pb.num_slots = 2;
    CHECK(check(cpu2, gpu2, pb, "V=262144 n=300") == 0);
    dds_destroy(cpu2);
    dds_destroy(gpu2);
  }
  dds_destroy(cpu);
  dds_destroy(gpu);
}

TEST_CASE("stash: many kept rows (one chunk per row) and few kept rows of a big vocabulary") {
  std::mt19937_64 rng(5);
  {
    const int32_t V = 1025, rows = 4096, R = 1024;
    dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 20);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 20);
    StashProblem pb = make_problem(rng, V, rows, R, DDS_DTYPE_BF16, 20, 0, 1, kNormal);
    CHECK(check(cpu, gpu, pb, "4096 x 1025") == 0);
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
  {
    const int32_t V = 262144, rows = 64, R = 64;
    dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 20);
    dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 20);
    StashProblem pb = make_problem(rng, V, rows, R, DDS_DTYPE_F32, 20, 0, 16, kNormal);
    pb.use_committed = true;
    CHECK(check(cpu, gpu, pb, "64 x 262144, 1 in 16 kept, committed") == 0);
    dds_destroy(cpu);
    dds_destroy(gpu);
  }
}

TEST_CASE("stash: graph capture, replay with changed keep flags and temperatures") {
  std::mt19937_64 rng(77);
  const int32_t V = 32001, rows = 40, R = 10, n = 5;
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, V, rows, R, 20);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, V, rows, R, 20);
  StashProblem pb = make_problem(rng, V, rows, R, DDS_DTYPE_BF16, n, 0, 2, kNormal);
  pb.use_committed = true;
  Bound b(true);
  dds_stash_args a = make_args(pb, b);
  Out o;
  poison(o, pb);
  int32_t* dtok = b.put(o.tok);
  float* dval = b.put(o.val);
  int32_t* drank = b.put(o.rank);
  int32_t* dstat = b.put(o.status);
  a.out_token_ids = dtok;
  a.out_logprobs = dval;
  a.out_ranks = drank;
  a.request_status = dstat;
  cudaStream_t st;
  REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
  dds_status s = DDS_OK;
  const CapturedGraph graph(st, [&] { s = dds_stash_logprobs(gpu, &a, st); });
  INFO(dds_last_error());
  REQUIRE(s == DDS_OK);
  for (int rep = 0; rep < 4; ++rep) {
    for (int32_t r = 0; r < R; ++r) {
      pb.keep[r] = (rng() % 3) == 0;
      pb.T[r] = rep == 2 ? 0.5f : (rng() % 2 ? 1.f : 1.7f);
    }
    REQUIRE(cudaMemcpy(const_cast<uint8_t*>(a.keep), pb.keep.data(), R, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(const_cast<float*>(a.temperatures), pb.T.data(), R * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    Out g;
    poison(g, pb);
    REQUIRE(cudaMemcpy(dtok, g.tok.data(), g.tok.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dval, g.val.data(), g.val.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(drank, g.rank.data(), g.rank.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dstat, g.status.data(), g.status.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    graph.launch();
    REQUIRE(cudaStreamSynchronize(st) == cudaSuccess);
    b.get(g.tok, dtok);
    b.get(g.val, dval);
    b.get(g.rank, drank);
    b.get(g.status, dstat);
    const Out c = run(cpu, pb, false);
    char what[48];
    std::snprintf(what, sizeof what, "graph replay %d", rep);
    CHECK(compare(g, c, pb, what) == 0);
  }
  cudaStreamDestroy(st);
  dds_destroy(cpu);
  dds_destroy(gpu);
}
