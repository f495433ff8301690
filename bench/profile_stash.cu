// dds_profile_stash: calls dds_stash_logprobs a few times on one shape, for a profiler (ncu /
// nsys) to pick one launch and for A/B runs of median call times.
// Usage: dds_profile_stash [f32|bf16] [V] [rows] [keep_every] [n] [calls]
// One row per request, every keep_every-th request kept, T = 1, entry 0 = argmax, top-n by
// log-prob, outputs ids + log-probs + ranks (as dds_bench's stash scenarios). Logits are
// sigma * N(0, 1), sigma = 2 (filled on the device). Prints the median call time (CUDA events;
// unreliable under a profiler, which serialises and replays kernels).
// --dump FILE: the last call's outputs (ids, log-probs, ranks) written raw to FILE (for
// cmp between two builds of the library). Slots of requests not kept are zero.
#include <dds/dds.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "profile_common.h"

int main(int argc, char** argv) {
  const char* dump = nullptr;  // trailing option: --dump FILE
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) {
      dump = argv[i + 1];
      argc = i;
      break;
    }
  const int bf16 = argc > 1 && !std::strcmp(argv[1], "bf16");
  const int V = argc > 2 ? std::atoi(argv[2]) : 32000, rows = argc > 3 ? std::atoi(argv[3]) : 256;
  const int every = argc > 4 ? std::max(1, std::atoi(argv[4])) : 16;
  const int n = argc > 5 ? std::atoi(argv[5]) : 5;
  const int calls = argc > 6 ? std::atoi(argv[6]) : 5;
  const size_t cnt = (size_t)V * rows;
  void* logits;
  int32_t *tok, *rank;
  float* val;
  uint8_t* keep;
  const size_t outn = (size_t)rows * (n + 1);
  if (cudaMalloc(&logits, cnt * (bf16 ? 2 : 4)) != cudaSuccess || cudaMalloc(&tok, outn * 4) != cudaSuccess ||
      cudaMalloc(&rank, outn * 4) != cudaSuccess || cudaMalloc(&val, outn * 4) != cudaSuccess ||
      cudaMalloc(&keep, rows) != cudaSuccess) {
    std::printf("dds_profile_stash: no CUDA device or out of memory\n");
    return 1;
  }
  fill<<<2048, 256>>>(logits, cnt, bf16, 4321u);
  cudaMemset(tok, 0, outn * 4);
  cudaMemset(rank, 0, outn * 4);
  cudaMemset(val, 0, outn * 4);
  std::vector<uint8_t> k(rows, 0);
  for (int r = 0; r < rows; r += every) k[r] = 1;
  cudaMemcpy(keep, k.data(), rows, cudaMemcpyHostToDevice);
  dds_sampler* s = make_cuda_sampler(V, rows, std::max(1, n));
  if (!s) return 1;
  dds_stash_args a;
  dds_stash_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = rows;
  a.logits = logits;
  a.dtype = bf16 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32;
  a.keep = keep;
  a.num_top = n;
  a.num_slots = rows;
  a.rows_per_slot = 1;
  a.out_token_ids = tok;
  a.out_logprobs = val;
  a.out_ranks = rank;
  const float med = median_call_us(calls, [&](int) {
    if (dds_stash_logprobs(s, &a, nullptr) == DDS_OK) return true;
    std::printf("dds_stash_logprobs: %s\n", dds_last_error());
    return false;
  });
  if (med < 0.f) return 1;
  if (dump) {
    std::vector<int32_t> h(outn * 3);
    cudaMemcpy(h.data(), tok, outn * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.data() + outn, val, outn * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.data() + 2 * outn, rank, outn * 4, cudaMemcpyDeviceToHost);
    if (FILE* f = std::fopen(dump, "wb")) {
      std::fwrite(h.data(), 4, h.size(), f);
      std::fclose(f);
    }
  }
  std::printf("dds_profile_stash %s V=%d rows=%d keep 1/%d n=%d: median %.1f us over %d calls\n", bf16 ? "bf16" : "f32",
              V, rows, every, n, med, calls);
  dds_destroy(s);
  return 0;
}
