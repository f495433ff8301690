// Host-emulated CUDA dds_stash_logprobs kernel (kernels/stash.cuh, see run_stash.sh) against the
// CPU backend: ragged requests, some not kept, bad slots, committed tokens or the argmax, the
// requests' own ids or the top-n, log-probs or tempered logits; ids and ranks exact, values within
// 1e-5 relative, slots of requests not kept untouched (poisoned outputs compared whole).
// Usage: emu_stash V n dtype(0 f32, 1 bf16, 2 f16) variant(0 top-n, 1 own ids, 2 logits mode,
//        3 committed tokens) [grid [requests (default 10; > 256: the kept-row scan's rounds)]]
// DDS_STASH_V2=1 (2) in the environment runs the v2 kernel (mode 2: v2 without its 16-bit tile
// pipeline), read as the library reads it, and also v1 on the same grid: byte-equal outputs.
#include "cuda_emu_stash.h"
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include <cstdio>
#include <type_traits>
#include <random>
#include <dds/dds.h>
#include "dtype.h"
#include "stash_emu.cuh"

static const float kInfF = INFINITY;

int main(int argc, char** argv) {
  const int V = argc > 1 ? atoi(argv[1]) : 3000, n = argc > 2 ? atoi(argv[2]) : 5;
  const int dtype = argc > 3 ? atoi(argv[3]) : 0, variant = argc > 4 ? atoi(argv[4]) : 0;
  const int grid = argc > 5 ? atoi(argv[5]) : 3;
  std::mt19937_64 rng(77 + V * 13 + n * 7 + dtype * 3 + variant);
  std::normal_distribution<float> nd(0.f, 1.f);
  // R requests (10) of 0..3 rows; request 3 not kept, request 5 a bad slot, 7 a bad temperature.
  const int R = argc > 6 ? std::max(10, atoi(argv[6])) : 10;
  std::vector<int32_t> offs{0};
  for (int r = 0; r < R; ++r) offs.push_back(offs.back() + (int)(rng() % 4));
  const int rows = offs.back();
  std::vector<float> lg((size_t)rows * V);
  for (int i = 0; i < rows; ++i)
    for (int t = 0; t < V; ++t) {
      float v = 2.f * nd(rng);
      if (i % 4 == 1) v = std::round(v * 2.f) / 2.f;  // ties
      if (i % 5 == 2 && rng() % 10 == 0) v = -kInfF;
      lg[(size_t)i * V + t] = v;
    }
  std::vector<uint16_t> lg16(lg.size());
  for (size_t k = 0; k < lg.size(); ++k)
    lg16[k] = dtype == 1 ? dds::f32_to_bf16(lg[k]) : dds::f32_to_f16(lg[k]);
  std::vector<uint8_t> keep(R, 1);
  keep[3] = 0;
  std::vector<int32_t> slots(R), nvalid(R), committed(rows), ids((size_t)R * n), nids(R);
  std::vector<float> temps(R);
  for (int r = 0; r < R; ++r) {
    slots[r] = R - 1 - r;
    nvalid[r] = (int)(rng() % 4);
    temps[r] = r % 3 == 0 ? 1.f : 0.5f + (float)(rng() % 100) / 50.f;
    nids[r] = n ? (int)(rng() % (n + 1)) : 0;
    for (int e = 0; e < n; ++e) ids[(size_t)r * n + e] = (int)(rng() % V);
  }
  slots[5] = R + 2;
  temps[7] = NAN;
  for (int i = 0; i < rows; ++i) committed[i] = (int)(rng() % V);
  const int rows_per_slot = 3, E = n + 1;

  dds_stash_args a;
  dds_stash_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = R;
  a.row_offsets = offs.data();
  a.logits = dtype == 0 ? (const void*)lg.data() : (const void*)lg16.data();
  a.dtype = dtype == 0 ? DDS_DTYPE_F32 : dtype == 1 ? DDS_DTYPE_BF16 : DDS_DTYPE_F16;
  a.row_stride = V;
  a.keep = keep.data();
  a.slots = slots.data();
  a.num_valid = nvalid.data();
  a.temperatures = temps.data();
  if (variant == 3) a.committed_tokens = committed.data();
  if (variant == 1) {
    a.token_ids = ids.data();
    a.num_token_ids = nids.data();
  }
  a.logits_mode = variant == 2 ? 1 : 0;
  a.num_top = n;
  a.num_slots = R;
  a.rows_per_slot = rows_per_slot;
  const size_t outn = (size_t)R * rows_per_slot * E;
  std::vector<int32_t> ct(outn, -7), cr(outn, -7), gt(outn, -7), gr(outn, -7), cs(R, -7), gs(R, -7);
  std::vector<float> cv(outn, 12345.f), gv(outn, 12345.f);

  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU;
  c.vocab_size = V;
  c.max_rows = rows > 0 ? rows : 1;
  c.max_requests = R;
  c.max_stash_width = n > 20 ? n : 20;
  dds_sampler* s;
  if (dds_create(&c, &s) != DDS_OK) { printf("create: %s\n", dds_last_error()); return 1; }
  a.out_token_ids = ct.data(); a.out_logprobs = cv.data(); a.out_ranks = cr.data(); a.request_status = cs.data();
  if (dds_stash_logprobs(s, &a, nullptr) != DDS_OK) { printf("cpu: %s\n", dds_last_error()); return 1; }

  // The kernel, launched as src/cuda_stash.cu launches it (grid shrunk: blocks run in turn).
  using namespace dds::stash;
  const bool count = a.committed_tokens != nullptr || a.token_ids != nullptr;
  Params P;
  memset(&P, 0, sizeof P);
  P.V = V; P.num_rows = rows; P.num_requests = R; P.row_offsets = offs.data(); P.logits = a.logits;
  P.row_stride = V; P.keep = keep.data(); P.slots = slots.data(); P.num_valid = nvalid.data();
  P.temperatures = temps.data(); P.temperature = 1.f; P.committed = a.committed_tokens;
  P.token_ids = a.token_ids; P.num_token_ids = a.num_token_ids; P.n = n; P.logits_mode = a.logits_mode;
  P.num_slots = R; P.rows_per_slot = rows_per_slot;
  P.out_tok = gt.data(); P.out_val = gv.data(); P.out_rank = gr.data(); P.req_status = gs.data();
  const int64_t cap = (int64_t)c.max_rows + (n <= 64 ? 8192 : 1024);
  std::vector<unsigned char> partials((size_t)(cap * partial_bytes(n)) + 64);
  std::vector<int32_t> counters(c.max_rows, 0);
  P.partials = partials.data(); P.partial_bytes = partial_bytes(n); P.partial_cap = (int32_t)cap;
  P.counters = counters.data();
  P.cum_bytes = (int32_t)align16((int64_t)(R + 1) * 4);
  // DDS_STASH_V2 (as the library reads it): unset / 0 = v1, 2 = mode 2, other numbers = v2
  const int v2 = v2_mode_of(getenv("DDS_STASH_V2"));
  P.warp_bytes = (int32_t)(v2 ? warp_smem_bytes_v2(n, count) : warp_smem_bytes(n, count));
  const int nwarps = kMaxWarps;
  if ((size_t)P.cum_bytes + (size_t)nwarps * P.warp_bytes > sizeof g_dynsmem_buf) { printf("smem\n"); return 1; }
  auto run_mode = [&](auto tag, auto mode) {
    using T = decltype(tag);
    constexpr int M = decltype(mode)::value;
    if (count) emu_launch(grid, nwarps * 32, [&] { stash_kernel<T, true, 2, M>(P); });
    else emu_launch(grid, nwarps * 32, [&] { stash_kernel<T, false, 2, M>(P); });
  };
  auto run = [&](auto tag, int v2k) {
    if (v2k == 1) run_mode(tag, std::integral_constant<int, 1>{});
    else if (v2k == 2) run_mode(tag, std::integral_constant<int, 2>{});
    else run_mode(tag, std::integral_constant<int, 0>{});
  };
  auto run_dtype = [&](int v2k) {
    if (dtype == 0) run(float{}, v2k); else if (dtype == 1) run(__nv_bfloat16{}, v2k); else run(__half{}, v2k);
  };
  run_dtype(v2);

  int bad = 0;
  // v2: also v1 on the same grid into fresh outputs; the two must agree byte for byte.
  int v1diff = 0;
  if (v2) {
    std::vector<int32_t> t1(outn, -7), r1(outn, -7), s1(R, -7);
    std::vector<float> v1(outn, 12345.f);
    Params P2 = P;
    P.out_tok = t1.data(); P.out_val = v1.data(); P.out_rank = r1.data(); P.req_status = s1.data();
    P.warp_bytes = (int32_t)warp_smem_bytes(n, count);
    std::fill(partials.begin(), partials.end(), (unsigned char)0x5a);
    run_dtype(0);
    P = P2;
    v1diff += memcmp(t1.data(), gt.data(), outn * 4) != 0;
    v1diff += memcmp(v1.data(), gv.data(), outn * 4) != 0;
    v1diff += memcmp(r1.data(), gr.data(), outn * 4) != 0;
    v1diff += memcmp(s1.data(), gs.data(), (size_t)R * 4) != 0;
    if (v1diff) printf("v2 (mode %d) and v1 outputs differ (%d of 4 arrays)\n", v2, v1diff);
    bad += v1diff;
  }
  for (size_t k = 0; k < outn; ++k) {
    const bool same_v = (gv[k] == cv[k]) || (std::isfinite(cv[k]) && std::fabs(gv[k] - cv[k]) <= 1e-5f * std::fabs(cv[k]) + 1e-6f);
    if (gt[k] != ct[k] || gr[k] != cr[k] || !same_v) {
      if (bad < 10) printf("elem %zu (slot %zu row %zu e %zu): id %d/%d rank %d/%d val %g/%g\n", k, k / (rows_per_slot * E),
                           (k / E) % rows_per_slot, k % E, gt[k], ct[k], gr[k], cr[k], gv[k], cv[k]);
      ++bad;
    }
  }
  for (int r = 0; r < R; ++r) if (gs[r] != cs[r]) { printf("status %d: %d/%d\n", r, gs[r], cs[r]); ++bad; }
  for (int i = 0; i < c.max_rows; ++i) if (counters[i]) { printf("counter %d not reset\n", i); ++bad; break; }
  printf("%sV=%d n=%d dtype=%d variant=%d rows=%d: %d bad elements\n",
         v2 == 0 ? "" : v2 == 2 ? (v1diff ? "v2 mode 2 (NOT byte-equal to v1) " : "v2 mode 2 (byte-equal to v1) ")
                                : (v1diff ? "v2 (NOT byte-equal to v1) " : "v2 (byte-equal to v1) "), V, n, dtype,
         variant, rows, bad);
  dds_destroy(s);
  return bad != 0;
}
