// The per-request settings of the dds_sample test batches, host code only (no doctest, no CUDA):
// included by tests/gpu/sample_problem.h (the GPU tests' generators, and through it
// test_gpu_reliability.cu's) and by tests/emu/emu_sample.cpp (the emulated kernels' batch).
#ifndef DDS_TESTS_GPU_SAMPLE_ROWS_H_
#define DDS_TESTS_GPU_SAMPLE_ROWS_H_

#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace sample_rows {

// One request's parameters: temperature, guidance scale, top-p, min-p, top-k, uncond row offset
// (-1: none); for the filter batches also the logits' sigma and kind (filter_logit).
struct Settings {
  float T = 1.f, g = 0.f, p = 1.f, mp = 0.f, sigma = 2.f;
  int32_t k = 0, uo = -1;
  int kind = 0;
};

// Appends s to a problem's per-request arrays T, G, P, MP, K, uoffs.
template <class Problem>
void push(Problem& pb, const Settings& s) {
  pb.T.push_back(s.T);
  pb.G.push_back(s.g);
  pb.P.push_back(s.p);
  pb.MP.push_back(s.mp);
  pb.K.push_back(s.k);
  pb.uoffs.push_back(s.uo);
}

// The 13 settings of the mixed batches (c = 0..12), hostile ones included, for a request of n
// rows from row `first` with `unrows` uncond rows. Case 12 draws its k from rng.
inline Settings mixed(int32_t c, int32_t first, int32_t n, int32_t unrows, std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Settings s;
  switch (c) {
    case 0: break;
    case 1: s.T = 0.f; break;
    case 2: s.T = 0.7f; s.g = 1.5f; s.uo = first; break;
    case 3: s.k = 50; break;
    case 4: s.T = 1.3f; s.p = 0.9f; break;
    case 5: s.mp = 0.05f; break;
    case 6: s.T = 0.8f; s.k = 20; s.p = 0.8f; s.mp = 0.02f; s.g = -0.5f; s.uo = first + 2; break;
    case 7: s.p = 0.f; break;
    case 8: s.T = 2.f; s.p = 0.5f; s.g = 2.f; s.uo = -1; break;
    case 9: s.T = nan; s.k = -3; s.p = nan; s.mp = -1.f; s.g = inf; s.uo = 0; break;
    case 10: s.T = 0.5f; s.g = 1.f; s.uo = unrows - n + 1; break;  // out of range: flagged
    case 11: s.T = 1e-39f; s.g = 3.f; s.uo = first; break;       // 1/T overflows: greedy
    case 12: s.k = 1 + (int32_t)(rng() % 3000); s.p = 0.95f; break;
  }
  return s;
}

// The 18 settings of the filter batches (c = 0..17, one row per request, row r): both paths of
// the CUDA filter (streaming candidates: peaked rows, small k, min-p; the exact fallback: flat
// rows, wide nuclei, k = 1024 on sigma-2 rows, ties beyond a list's capacity). kind: 0 gaussian,
// 1 flat (all equal), 2 coarse ties, 3 sparse (few finite), 4 many ties at the maximum.
inline Settings filter(int32_t c, int32_t r, int32_t V) {
  Settings s;
  switch (c) {
    case 0: s.k = 50; break;
    case 1: s.k = 1; break;
    case 2: s.k = 1024; break;
    case 3: s.p = 0.9f; s.sigma = 8.f; break;
    case 4: s.p = 0.9f; s.kind = 1; break;
    case 5: s.mp = 0.05f; break;
    case 6: s.T = 0.7f; s.k = 50; s.p = 0.9f; s.mp = 0.02f; break;
    case 7: s.T = 1.3f; s.p = 0.5f; s.sigma = 4.f; break;
    case 8: s.k = 20; s.kind = 2; break;
    case 9: s.p = 0.f; s.kind = 4; break;
    case 10: s.k = V - 1; break;
    case 11: s.mp = 0.9f; s.sigma = 8.f; break;
    case 12: s.p = 0.9f; s.sigma = 4.f; break;
    case 13: s.T = 0.8f; s.k = 5; s.g = 1.5f; s.uo = r; break;
    case 14: break;
    case 15: s.T = 0.f; s.k = 50; break;
    case 16: s.k = 50; s.p = 0.95f; s.kind = 3; break;
    case 17: s.k = 3; s.mp = 0.1f; s.kind = 4; break;
  }
  return s;
}

// Column t of a filter row of kind 1..4 from its gaussian draw v (kind 3 draws from rng).
inline float filter_logit(int kind, float v, int32_t t, int32_t V, std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  if (kind == 1) v = 0.25f;
  if (kind == 2) v = std::round(v * 2.f) / 2.f;
  if (kind == 3) v = (rng() % 5000 == 0 || t == V / 2) ? v : -inf;
  if (kind == 4) v = (t % 3 == 0) ? 5.f : std::min(v, 4.f);
  return v;
}

// Signed-zero rows (row r of V columns): a few 1.0 columns and +-0 everywhere else (random
// signs), whose thresholds fall among the zeros (top-k keeps `cut` zeros, top-p's boundary lies
// among them, min-p 0.3 < exp(-1) keeps every zero), so that the kept zeros are the lowest
// columns whatever their sign (-0 and +0 are one value). zero_settings: the request's filters;
// zero_row: put(t, value) for every column, drawing from rng.
inline Settings zero_settings(int32_t r, int32_t V) {
  const int ones = 2 + r % 5, cut = 1 + (r / 3) % 9;
  const double e1 = std::exp(1.0);
  Settings s;
  if (r % 4 != 1) s.k = ones + cut;
  if (r % 4 == 1) s.p = (float)((ones * e1 + cut - 0.5) / (ones * e1 + (V - ones - 1)));
  if (r % 4 == 2) s.mp = 0.3f;
  if (r % 4 == 3) s.p = 0.999f;
  return s;
}
template <class Put>
void zero_row(int32_t r, int32_t V, std::mt19937_64& rng, const Put& put) {
  const int ones = 2 + r % 5;
  for (int32_t t = 0; t < V; ++t) put(t, (rng() & 1) ? -0.f : 0.f);
  for (int j = 0; j < ones; ++j) put((int32_t)(rng() % (uint64_t)V), 1.f);
}

// Rows of two tie groups above a low floor (row r of V columns): `a` columns at 3, `b` at 2 (at
// distinct random columns), the rest N(-12, 1), the thresholds inside a group: top-p inside the
// 3s (r % 4 == 0) or the 2s (1; these rows' candidates number hundreds); top-k a + b with top-p
// inside the 2s (2) and top-k inside the 2s under top-p 0.999 (3), whose candidates are few (the
// split finish's small S). tie_settings: the request's filters; tie_row: put(t, value) for every
// column, drawing from rng.
inline Settings tie_settings(int32_t r, int32_t /*V*/) {
  const int a = 2 + r % 5, b = 3 + (r / 5) % 4;
  const int ja = 1 + (r / 4) % (a - 1), jb = 1 + (r / 4) % (b - 1);
  const double e1 = std::exp(-1.0), z = a + b * e1;
  Settings s;
  if (r % 4 == 0) s.p = (float)((ja - 0.5) / z);
  if (r % 4 == 1) s.p = (float)((a + (jb - 0.5) * e1) / z);
  if (r % 4 == 2) s.k = a + b, s.p = (float)((a + (jb - 0.5) * e1) / z);
  if (r % 4 == 3) s.k = a + jb, s.p = 0.999f;
  return s;
}
template <class Put>
void tie_row(int32_t r, int32_t V, std::mt19937_64& rng, const Put& put) {
  const int a = 2 + r % 5, b = 3 + (r / 5) % 4;
  std::normal_distribution<float> nd(-12.f, 1.f);
  for (int32_t t = 0; t < V; ++t) put(t, nd(rng));
  std::vector<int32_t> used;
  for (int j = 0; j < a + b; ++j) {
    int32_t t;
    do t = (int32_t)(rng() % (uint64_t)V);
    while (std::find(used.begin(), used.end(), t) != used.end());
    used.push_back(t);
    put(t, j < a ? 3.f : 2.f);
  }
}

// Top-p rows whose boundary digit (key bits 31..21, the fallback's first radix digit) is wide
// (row r of V columns): V / 8 columns in [3, 3.1), V / 4 in [0.5, 0.6) (one digit), the rest in
// [-20, -19.9); top-p 0.9 / 0.95 ends among the V / 4, which at V = 32000 is more columns than
// filter_kernel's list of a row in shared memory holds and fewer than the split fallback's could
// (kernels/sample/filter_select.cuh, wide_list_cap). digit_settings: the request's filters (min-p
// 0.01 on every fourth row); digit_row: put(t, value) for every column, drawing from rng.
inline Settings digit_settings(int32_t r, int32_t /*V*/) {
  Settings s;
  s.p = r % 2 ? 0.95f : 0.9f;
  if (r % 4 == 2) s.mp = 0.01f;
  return s;
}
template <class Put>
void digit_row(int32_t /*r*/, int32_t V, std::mt19937_64& rng, const Put& put) {
  std::uniform_real_distribution<float> ud(0.f, 0.1f);
  for (int32_t t = 0; t < V; ++t) put(t, ud(rng) + (t % 8 == 0 ? 3.f : t % 8 < 3 ? 0.5f : -20.f));
}

}  // namespace sample_rows

#endif  // DDS_TESTS_GPU_SAMPLE_ROWS_H_
