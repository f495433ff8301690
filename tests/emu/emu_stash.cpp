// Host-emulated CUDA dds_stash_logprobs kernel (kernels/stash/, see run_stash.sh) against the CPU
// backend: ragged requests, some not kept, bad slots, out-of-range ids, committed tokens or the argmax, the
// requests' own ids or the top-n, log-probs or tempered logits; ids and ranks exact, values within
// 1e-5 relative, slots of requests not kept untouched (poisoned outputs compared whole). The
// kernel runs as the CUDA backend runs it: the same parameter block and workspace layout
// (src/stash_params.h) and the library's launcher (launch_stash), on a device of `sms` SMs
// (the emulation's occupancy is one CTA per SM, so the grid is `sms` unless the rows have fewer
// items) with the H200's shared memory per CTA.
// Usage: emu_stash V n dtype(0 f32, 1 bf16, 2 f16) variant(0 top-n, 1 own ids, 2 logits mode,
//        3 committed tokens) [sms (default 3) [requests (default 10; > 4096: the kept-row prefix in
//        rounds) [K: instead, 64 rows as 4 requests with case K's hostile row_offsets of
//        tests/hostile_cases.h, all kept, slot r, 64 rows per slot; -1 none [mask (0 none,
//        1 dense: columns allowed with probability 0.7, 2 sparse: 0.02; request 6's mask all
//        zero, a stride of 2 spare words) [layout (0 ragged requests with row_offsets; 1 one
//        row per request without row_offsets, requests 0, 16, 32, .. and 3, 10, 17, .. kept;
//        2 the same with keep flags only, no other per-request array: the benchmark's call)]]]]]
#include <cuda_runtime.h>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include <cstdio>
#include <random>
#include <dds/dds.h>
#include "dtype.h"
#include "stash/stash.cuh"
#include "stash_params.h"
#include "../hostile_cases.h"

static const float kInfF = INFINITY;

int main(int argc, char** argv) {
  const int V = argc > 1 ? atoi(argv[1]) : 3000, n = argc > 2 ? atoi(argv[2]) : 5;
  const int dtype = argc > 3 ? atoi(argv[3]) : 0, variant = argc > 4 ? atoi(argv[4]) : 0;
  const int sms = argc > 5 ? atoi(argv[5]) : 3;
  std::mt19937_64 rng(77 + V * 13 + n * 7 + dtype * 3 + variant);
  std::normal_distribution<float> nd(0.f, 1.f);
  // R requests (10) of 0..3 rows; request 3 not kept, request 5 a bad slot, 7 a bad temperature.
  const int hk = argc > 7 ? atoi(argv[7]) : -1;
  const int R = hk >= 0 ? hostile::kReqs : argc > 6 ? std::max(10, atoi(argv[6])) : 10;
  const int mask = argc > 8 ? atoi(argv[8]) : 0;
  const int layout = hk < 0 && argc > 9 ? atoi(argv[9]) : 0;
  std::vector<int32_t> offs{0};
  for (int r = 0; r < R; ++r) offs.push_back(offs.back() + (int)(rng() % 4));
  if (hk >= 0) {
    int32_t nc;
    const int32_t* h = hostile::cases(&nc)[hk].offs;
    offs.assign(h, h + R + 1);  // every case ends at 64 = rows
  }
  if (layout) offs.resize(1);
  for (int r = 0; layout && r < R; ++r) offs.push_back(r + 1);
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
  if (hk < 0) keep[3] = 0;
  for (int r = 0; layout && r < R; ++r) keep[r] = r % 16 == 0 || r % 7 == 3;
  std::vector<int32_t> slots(R), nvalid(R), committed(rows), ids((size_t)R * n), nids(R);
  std::vector<float> temps(R);
  for (int r = 0; r < R; ++r) {
    slots[r] = R - 1 - r;
    nvalid[r] = (int)(rng() % 4);
    temps[r] = r % 3 == 0 ? 1.f : 0.5f + (float)(rng() % 100) / 50.f;
    nids[r] = n ? (int)(rng() % (n + 1)) : 0;
    for (int e = 0; e < n; ++e) ids[(size_t)r * n + e] = (int)(rng() % V);
  }
  if (hk < 0) {
    slots[5] = R + 2;
    temps[7] = NAN;
  } else {
    for (int r = 0; r < R; ++r) {
      slots[r] = r;
      nvalid[r] = 60 - 7 * r;
    }
  }
  for (int i = 0; i < rows; ++i) committed[i] = (int)(rng() % V);
  if (hk < 0) {  // out-of-range inputs (DDS_REQ_BAD_TOKEN_ID / _NUM_TOKEN_IDS)
    if (n > 0) ids[(size_t)2 * n] = -2;
    nids[6] = n + 3;
    if (rows > 0) committed[rows / 2] = V + 1;
  }
  const int rows_per_slot = hk >= 0 ? hostile::kRows : layout ? 1 : 3, E = n + 1;
  const int64_t words = (V + 31) / 32, mstride = words + 2;
  std::vector<int32_t> masks((size_t)R * mstride);
  {
    std::uniform_real_distribution<float> ud(0.f, 1.f);
    const float prob = mask == 1 ? 0.7f : 0.02f;
    for (size_t w = 0; w < masks.size(); ++w) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b)
        if (ud(rng) < prob) bits |= 1u << b;
      masks[w] = (int32_t)bits;
    }
    if (R > 6)
      for (int64_t w = 0; w < words; ++w) masks[6 * mstride + w] = 0;
  }

  dds_stash_args a;
  dds_stash_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = R;
  a.row_offsets = layout ? nullptr : offs.data();
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
  if (layout == 2) a.slots = a.num_valid = nullptr, a.temperatures = nullptr;
  if (mask) {
    a.allowed_token_masks = masks.data();
    a.allowed_mask_stride = mstride;
  }
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

  // The kernel, launched as src/cuda_stash.cu launches it.
  constexpr size_t kSmemOptin = 227 * 1024;  // the H200's shared memory per CTA (opt-in)
  const dds::StashLayout L = dds::stash_layout(c, 0);
  std::vector<unsigned char> ws((size_t)L.total, 0);  // counters zero at rest
  a.out_token_ids = gt.data(); a.out_logprobs = gv.data(); a.out_ranks = gr.data(); a.request_status = gs.data();
  const dds::stash::Params P = dds::stash_params(a, V, ws.data(), L);
  const int nwarps = dds::stash::warps_per_cta(P, kSmemOptin);
  if (nwarps == 0) { printf("smem\n"); return 1; }
  if (dds::stash::launch_stash(a.dtype, P, nwarps, sms, nullptr) != cudaSuccess) { printf("launch\n"); return 1; }
  const int32_t* counters = P.counters;

  int bad = 0;
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
  printf("V=%d n=%d dtype=%d variant=%d rows=%d sms=%d warps=%d mask=%d layout=%d: %d bad elements\n", V, n,
         dtype, variant, rows, sms, nwarps, mask, layout, bad);
  dds_destroy(s);
  return bad != 0;
}
