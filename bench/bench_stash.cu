// dds_stash_logprobs scenarios of dds_bench (uses bench_common.h: make_pool, time_us,
// floor_read_us, print_row).
//
// Scenarios: all rows kept and 1 in 16 kept, n = 5 and 20, V in {32000, 262144}, rows in
// {256, 4096}, f32 and bf16; logits sigma * N(0, 1) with sigma = 2, one row per request, T = 1,
// entry 0 = argmax, top-n by log-prob, outputs ids + log-probs + ranks. The floor is one plain read
// of the KEPT rows' bytes (a contiguous read of the same byte count, same rotating slices), timed
// in the same run; MB is those bytes. Skipped rows must not show in the time.
#include "bench_common.h"

using namespace bench;

void run_stash_bench() {
  const int Vs[] = {32000, 262144};
  const int rowss[] = {256, 4096};
  const int ns[] = {5, 20};
  print_header();
  for (int dt : {1, 0}) {
    const char* dname = dt == 0 ? "f32" : "bf16";
    const size_t es = dt == 0 ? 4 : 2;
    for (int V : Vs) {
      for (int rows : rowss) {
        if (g_quick && rows == 256) continue;
        const size_t bytes = (size_t)rows * V * es;
        dds_sampler* s = make_cuda_sampler(V, rows, 20);
        if (!s) std::exit(1);
        Pool pool = make_pool(bytes, dt, 2.f, 4321 + V + rows);
        uint8_t *keep_all = nullptr, *keep_16 = nullptr;
        int32_t *tok = nullptr, *rank = nullptr;
        float* val = nullptr;
        std::vector<uint8_t> ka(rows, 1), k16(rows, 0);
        for (int r = 0; r < rows; r += 16) k16[r] = 1;
        BENCH_CHECK(cudaMalloc(&keep_all, rows));
        BENCH_CHECK(cudaMalloc(&keep_16, rows));
        BENCH_CHECK(cudaMemcpy(keep_all, ka.data(), rows, cudaMemcpyHostToDevice));
        BENCH_CHECK(cudaMemcpy(keep_16, k16.data(), rows, cudaMemcpyHostToDevice));
        const size_t outn = (size_t)rows * 21;
        BENCH_CHECK(cudaMalloc(&tok, outn * 4));
        BENCH_CHECK(cudaMalloc(&rank, outn * 4));
        BENCH_CHECK(cudaMalloc(&val, outn * 4));
        const int kept16 = (rows + 15) / 16;
        const size_t bytes16 = (size_t)kept16 * V * es;
        const double floor_all = floor_read_us(pool, nullptr, bytes);
        const double floor_16 = floor_read_us(pool, nullptr, bytes16);
        for (int n : ns) {
          for (int which = 0; which < 2; ++which) {
            const uint8_t* keep = which == 0 ? keep_all : keep_16;
            auto call = [&](int i) {
              dds_stash_args a;
              dds_stash_args_init(&a, sizeof a);
              a.num_rows = rows;
              a.num_requests = rows;
              a.logits = pool.slice(i);
              a.dtype = dt;
              a.keep = keep;
              a.num_top = n;
              a.num_slots = rows;
              a.rows_per_slot = 1;
              a.out_token_ids = tok;
              a.out_logprobs = val;
              a.out_ranks = rank;
              BENCH_DDS(dds_stash_logprobs(s, &a, nullptr));
            };
            const double us = time_us(call);
            Row r;
            char name[32];
            std::snprintf(name, sizeof name, "stash n%d %s", n, which == 0 ? "all" : "1/16");
            r.scenario = name;
            r.dtype = dname;
            r.V = V;
            r.rows = rows;
            r.mb = (which == 0 ? bytes : bytes16) / 1e6;
            r.floor_us = which == 0 ? floor_all : floor_16;
            r.dds_us = us;
            r.note = which == 0 ? "all kept" : "kept rows 0,16,32,..";
            print_row(r);
          }
        }
        cudaFree(keep_all);
        cudaFree(keep_16);
        cudaFree(tok);
        cudaFree(rank);
        cudaFree(val);
        free_pool(pool);
        dds_destroy(s);
      }
    }
  }
}
