// Host-emulated CUDA dds_reveal (kernels/reveal/reveal.cuh) against the CPU backend; see run.sh.
#include <cuda_runtime.h>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include "reveal/reveal.cuh"
#include <dds/dds.h>
#include <cstdio>
#include <random>

#include "../hostile_cases.h"
using namespace dds;

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  dds_sampler_config c; dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU; c.vocab_size = 64; c.max_rows = 1 << 15; c.max_requests = 1024;
  dds_sampler* s; dds_create(&c, &s);
  std::mt19937 rng(2024);
  int bad_total = 0;
  struct Sh { int R, max_rows, L; };
  // The last shape, 4 requests of 16 rows, runs once per hostile row_offsets case of
  // tests/hostile_cases.h (variant = the case; odd cases with positions NULL).
  for (Sh sh : {Sh{1, 1, 4}, Sh{3, 7, 16}, Sh{20, 64, 64}, Sh{16, 300, 300}, Sh{2, -3000, 3000}, Sh{1, -5000, 5000}, Sh{40, 40, 64},
                Sh{hostile::kReqs, -16, 64}}) {
   const bool hz = sh.R == hostile::kReqs && sh.max_rows == -16;
   for (int variant = 0; variant < (hz ? 4 : 3); ++variant) {
    const int R = sh.R, L = sh.L;
    std::vector<int32_t> offs{0}, pos, pol, counts, sl, tokens, canvas;
    std::vector<float> scores, thr, fac, pt, eb; std::vector<uint8_t> elig; std::vector<uint64_t> seeds; std::vector<uint32_t> steps;
    std::uniform_real_distribution<float> U(0.f, 1.f);
    std::uniform_int_distribution<int> nr(1, std::max(1, sh.max_rows));
    for (int r = 0; r < R; ++r) offs.push_back(offs.back() + std::min(sh.max_rows < 0 ? -sh.max_rows : nr(rng), L));
    const int rows = offs.back();
    for (int r = 0; r < R; ++r) {
      const int n = offs[r + 1] - offs[r];
      std::vector<int32_t> perm(L); for (int q = 0; q < L; ++q) perm[q] = q; std::shuffle(perm.begin(), perm.end(), rng);
      for (int j = 0; j < n; ++j) {
        pos.push_back(U(rng) < 0.02f ? L + 3 : perm[j]);
        float sc = variant == 0 ? std::floor(U(rng) * 20.f) / 20.f : variant == 1 ? U(rng) : (U(rng) < 0.1f ? NAN : std::floor(U(rng) * 3) / 3 + 0.5f);
        scores.push_back(sc);
        elig.push_back(U(rng) < 0.85f);
        tokens.push_back((int32_t)(U(rng) * 50));
      }
      pol.push_back((r + variant) % 5);  // 4: ENTROPY_BOUND
      eb.push_back(r % 7 == 3 ? NAN : r % 7 == 5 ? INFINITY : r % 7 == 6 ? 0.f : U(rng) * 2.f); counts.push_back((int)(U(rng) * 6) - 1); sl.push_back((int)(U(rng) * 5));
      thr.push_back(0.5f + 0.5f * U(rng)); fac.push_back(r % 9 == 4 ? -0.5f : U(rng) * 2.f); pt.push_back(r % 3 == 0 ? 0.5f : 0.f);
      seeds.push_back(rng()); steps.push_back(rng() % 100);
    }
    canvas.assign((size_t)R * L, 60);
    for (int r = 0; r < R; ++r) { if (r % 5 == 1) canvas[(size_t)r * L + L / 2] = 61; for (int q = 0; q < L / 3; ++q) canvas[(size_t)r * L + q] = 7; }
    for (auto& t : tokens) if (t == 49) t = 61;
    std::vector<uint8_t> rev(rows, 9), rev2(rows, 9); std::vector<int32_t> nrev(R, -5), nrev2(R, -5), fin(R, -5), fin2(R, -5), st(R, -5), st2(R, -5);
    std::vector<int32_t> can1 = canvas, can2 = canvas;
    if (hz) {
      int32_t nc;
      const int32_t* h = hostile::cases(&nc)[variant].offs;
      offs.assign(h, h + R + 1);
      if (variant % 2) pos.clear();
    }
    const int32_t* posp = pos.empty() ? nullptr : pos.data();
    dds_reveal_args a; dds_reveal_args_init(&a, sizeof a);
    a.num_rows = rows; a.num_requests = R; a.row_offsets = offs.data(); a.positions = posp; a.scores = scores.data(); a.eligible = elig.data();
    a.policies = pol.data(); a.counts = counts.data(); a.steps_left = sl.data(); a.thresholds = thr.data(); a.factors = fac.data();
    a.entropy_bounds = eb.data();
    a.position_temperatures = pt.data(); a.seeds = seeds.data(); a.steps = steps.data(); a.canvas = can1.data(); a.canvas_length = L; a.canvas_stride = L;
    a.tokens = tokens.data(); a.mask_token = 60; a.eos_token = 61; a.reveal = rev.data(); a.num_revealed = nrev.data(); a.finished = fin.data(); a.request_status = st.data();
    if (dds_reveal(s, &a, nullptr) != DDS_OK) { printf("cpu fail %s\n", dds_last_error()); return 1; }
    reveal::Params p{};
    p.num_rows = rows; p.num_requests = R; p.row_offsets = offs.data(); p.positions = posp; p.scores = scores.data(); p.eligible = elig.data();
    p.policies = pol.data(); p.policy = 0; p.counts = counts.data(); p.count = 1; p.steps_left = sl.data(); p.thresholds = thr.data(); p.factors = fac.data();
    p.entropy_bounds = eb.data(); p.entropy_bound = 0.1f;
    p.position_temperatures = pt.data(); p.seeds = seeds.data(); p.steps = steps.data(); p.canvas = can2.data(); p.canvas_stride = L; p.canvas_length = L;
    p.tokens = tokens.data(); p.mask_token = 60; p.eos_token = 61; p.reveal = rev2.data(); p.num_revealed = nrev2.data(); p.finished = fin2.data(); p.request_status = st2.data();
    std::vector<uint64_t> ws(2 * (size_t)rows);
    p.ws_key = ws.data(); p.ws_tie = ws.data() + rows;
    reveal::launch_reveal(p, nullptr);
    int bad = (rev != rev2) + (nrev != nrev2) + (fin != fin2) + (st != st2) + (can1 != can2);
    int nsum = 0; for (int x : nrev) nsum += x;
    printf("reveal R=%d rows=%d variant=%d: mismatching outputs %d (revealed %d)\n", R, rows, variant, bad, nsum);
    if (bad) for (int r = 0; r < R && r < 50; ++r) if (nrev[r] != nrev2[r]) printf("  r%d policy %d nrev %d/%d\n", r, pol[r], nrev[r], nrev2[r]);
    bad_total += bad;
   }
  }
  printf("TOTAL bad %d\n", bad_total);
  return bad_total != 0;
}
