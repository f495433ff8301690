// Host-emulated CUDA dds_sample kernels (kernels/sample/, see run_sample.sh) against the CPU
// backend: a mixed batch of 22 row kinds (top-k / top-p / min-p / greedy / guided / ties / flat /
// -inf / NaN rows, per-request arrays), every output incl. probs compared (tokens, argmax, status
// exact; statistics within 1e-5 relative). The kernels run as the CUDA backend runs them: the
// same parameter block, launch plan and launcher, with the plan's rules unless the mode overrides
// them.
// On stderr: the rows left to the fallback (their case; with the split finish, their row and
// the size of their candidate set S) and, with the split finish, every row's |S|.
// Usage: emu_sample V rows dtype(0 f32, 1 bf16) stats(0 processed, 1 guided) [tscale [mode]]
//        emu_sample minp_floor   (check_minp_floor below; run_sample.sh runs it once)
//   mode: "default" or a comma list of plan overrides (kernels/sample/plan.h, SamplePlanOverrides:
//   small_plain, small_filter, cta, bpw, fuse, direct, fbpw, top2, cf_wpc, smem_row, exact_all,
//   filter_grid, split, splitfilter, sfcols, joint, rank; key=value), ban=N (the banned token, default 3) and mask=N (allowed-token
//   masks, stride of 3 spare words: 1 dense (each column allowed with probability 0.7), 2 sparse
//   (0.02, and one allowed column in every 97); both with every 9th request's mask all zero
//   (DDS_REQ_EMPTY_ROW) and request 2's mask allowing columns 0..31 only), zeros=1 (rows of
//   +-0 with their thresholds among the zeros, g_zeros below), ties=1 (two tie groups above a
//   low floor, g_ties below); "A|B":
//   plan A against the CPU, and plan B's outputs equal to plan A's bit for bit (e.g.
//   split=1|split=0)
#include <cuda_runtime.h>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <random>
#include <dds/dds.h>
#include "dtype.h"
#include "sample/sample.cuh"
#include "sample_params.h"
#include "../hostile_cases.h"
#include "../gpu/sample_rows.h"
#include <string>
using namespace dds::ksample;
static const float kInf = INFINITY;

struct Prob {
  int V, rows, dtype;
  std::vector<uint16_t> lg16; std::vector<float> lg32;
  std::vector<float> ucd;  // f32 uncond (dtype f32 only used when dtype == 0)
  std::vector<int32_t> offs, pos, K, uoffs;
  std::vector<float> T, G, P, MP;
  std::vector<uint64_t> seeds; std::vector<uint32_t> steps;
  std::vector<int32_t> mask; int64_t mask_stride = 0;
  int stats;
};

float g_tscale = 1.f;
// Mode item wide=1: the rows cycle through wide top-p nuclei (the fallback's split, cases 20-24:
// flat sigma-2 / sigma-1 rows, p 0.9 / 0.95, min-p, NaN columns) and a few others (4: one value
// everywhere, a boundary digit too wide for the list; 12: sigma 4; 6: top-k with top-p).
int g_wide = 0;
static const int kWideCases[8] = {20, 21, 22, 23, 24, 4, 12, 6};
int g_case = -1;  // mode item case=N: every row of case N
// Mode item zeros=1: rows of a few 1.0 columns and +-0 elsewhere (random signs), the thresholds
// (top-k, top-p, min-p) among the zeros: -0 and +0 are one value, so the lower columns are kept.
int g_zeros = 0;
// Mode item ties=1: rows of two tie groups (3s and 2s) above a low floor, the thresholds inside
// the groups (sample_rows::tie_settings); the rows with top-k have few candidates, so the split
// finish's top-k runs by ranks (rank_topk) with ties at its cut.
int g_ties = 0;
// Mode item digit=1: top-p rows whose boundary digit holds V / 4 columns (sample_rows::digit_row).
int g_digit = 0;
int case_of(int r) { return g_case >= 0 ? g_case : g_wide ? kWideCases[r % 8] : r % 22; }  // a row's case of make()
Prob make(int V, int rows, int dtype, uint64_t seed, int stats) {
  std::mt19937_64 rng(seed);
  Prob pb; pb.V = V; pb.rows = rows; pb.dtype = dtype; pb.stats = stats;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  for (int r = 0; r <= rows; ++r) pb.offs.push_back(r);
  std::vector<float> lg((size_t)rows * V), uc((size_t)rows * V);
  for (int r = 0; r < rows; ++r) {
    // The GPU tests' 18 filter settings (sample_rows.h), then kinds 5 (an empty row: -inf and
    // NaN) and 6 (NaN columns) and wide nuclei on sigma-2 rows: the candidates cannot settle
    // them (filter kernel's boundary pass: the columns above the boundary digit summed, the
    // digit's listed).
    const int c = case_of(r);
    sample_rows::Settings q;
    if (c < 18) q = sample_rows::filter(c, r, V);
    if (c == 18) q.p = 0.9f, q.kind = 5;
    if (c == 19) q.k = 50, q.kind = 6;
    if (c == 20) q.p = 0.9f;
    if (c == 21) q.T = 0.8f, q.p = 0.95f, q.mp = 0.002f;
    // (wide=1 only) flatter, sigma-1 with min-p, NaN columns
    if (c == 22) q.T = 1.5f, q.p = 0.95f;
    if (c == 23) q.p = 0.9f, q.mp = 0.01f, q.sigma = 1.f;
    if (c == 24) q.T = 1.2f, q.p = 0.9f, q.kind = 6;
    if (q.T > 0.f) q.T *= g_tscale;
    if (g_zeros) q = sample_rows::zero_settings(r, V);
    if (g_ties) q = sample_rows::tie_settings(r, V);
    if (g_digit) q = sample_rows::digit_settings(r, V);
    sample_rows::push(pb, q);
    pb.seeds.push_back(rng()); pb.steps.push_back(rng() % 100);
    pb.pos.push_back(rng() % 100000);
    const int kind = q.kind;
    for (int t = 0; t < V; ++t) {
      float v = sample_rows::filter_logit(kind, q.sigma * nd(rng), t, V, rng);
      if (kind == 5) v = (t % 2) ? -kInf : NAN;
      if (kind == 6 && t % 7 == 0) v = NAN;
      if (kind != 3 && ud(rng) < 0.01f) v = -kInf;
      lg[(size_t)r * V + t] = v;
      uc[(size_t)r * V + t] = 2.f * nd(rng);
    }
    if (g_zeros) sample_rows::zero_row(r, V, rng, [&](int t, float v) { lg[(size_t)r * V + t] = v; });
    if (g_ties) sample_rows::tie_row(r, V, rng, [&](int t, float v) { lg[(size_t)r * V + t] = v; });
    if (g_digit) sample_rows::digit_row(r, V, rng, [&](int t, float v) { lg[(size_t)r * V + t] = v; });
  }
  if (dtype == 1) {
    pb.lg16.resize(lg.size());
    for (size_t i = 0; i < lg.size(); ++i) pb.lg16[i] = dds::f32_to_bf16(lg[i]);
    pb.lg32.resize(lg.size());
    std::vector<uint16_t> u16(uc.size());
    for (size_t i = 0; i < uc.size(); ++i) u16[i] = dds::f32_to_bf16(uc[i]);
    pb.ucd.resize(uc.size() / 2 + 1);
    memcpy(pb.ucd.data(), u16.data(), u16.size() * 2);
  } else {
    pb.lg32 = lg; pb.ucd = uc;
  }
  return pb;
}

dds::ksample::SamplePlanOverrides g_plan;
int g_ban = 3;
int g_hostile = -1;  // mode item hostile=K: case K of tests/hostile_cases.h (64 rows, 4 requests)
int g_mask = 0;  // 0 none, 1 dense, 2 sparse
int g_sf_min = -1;  // mode item sfrows=N: plan A must run the split fallback on at least N rows
int g_sf_rows = -1;  // rows the split fallback took in the last run (-1: its kernels did not run)

// Allowed-token masks for pb (g_mask): bits of columns >= V set at random too (ignored).
void make_masks(Prob& pb) {
  if (!g_mask) return;
  const int64_t words = (pb.V + 31) / 32;
  pb.mask_stride = words + 3;
  pb.mask.assign((size_t)pb.rows * pb.mask_stride, 0);
  std::mt19937_64 rng(99 + pb.V);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  const float prob = g_mask == 1 ? 0.7f : 0.02f;
  for (int r = 0; r < pb.rows; ++r) {
    int32_t* m = pb.mask.data() + (size_t)r * pb.mask_stride;
    for (int64_t w = 0; w < pb.mask_stride; ++w) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b) {
        const int64_t t = w * 32 + b;
        const bool on = ud(rng) < prob || (g_mask == 2 && t % 97 == r % 97);
        if (on) bits |= 1u << b;
      }
      m[w] = (int32_t)bits;
    }
    if (r % 9 == 4) for (int64_t w = 0; w < words; ++w) m[w] = 0;  // no allowed column: empty row
    if (r == 2) for (int64_t w = 0; w < words; ++w) m[w] = w == 0 ? -1 : 0;  // columns 0..31 only
  }
}
struct Out { std::vector<int32_t> tok, amax, st; std::vector<float> lp, conf, mar, ent, probs; };

void fill_args(dds_sample_args& a, Prob& pb, Out& o) {
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = pb.rows; a.num_requests = pb.rows; a.row_offsets = pb.offs.data(); a.positions = pb.pos.data();
  a.logits = pb.dtype == 1 ? (const void*)pb.lg16.data() : (const void*)pb.lg32.data();
  a.dtype = pb.dtype == 1 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32; a.row_stride = pb.V;
  a.uncond_logits = pb.ucd.data(); a.uncond_row_stride = pb.V; a.uncond_num_rows = pb.rows; a.uncond_row_offsets = pb.uoffs.data();
  a.guidance_scales = pb.G.data(); a.temperatures = pb.T.data(); a.top_ks = pb.K.data(); a.top_ps = pb.P.data(); a.min_ps = pb.MP.data();
  a.seeds = pb.seeds.data(); a.steps = pb.steps.data(); a.banned_token = g_ban; a.stats = pb.stats;
  if (g_hostile >= 0) {  // the hostile row_offsets, positions NULL (orphan rows keyed by i)
    int32_t n;
    a.num_requests = hostile::kReqs;
    a.row_offsets = hostile::cases(&n)[g_hostile].offs;
    a.positions = nullptr;
  }
  o.tok.assign(pb.rows, -7); o.amax.assign(pb.rows, -7); o.st.assign(pb.rows, -7);
  o.lp.assign(pb.rows, NAN); o.conf.assign(pb.rows, NAN); o.mar.assign(pb.rows, NAN); o.ent.assign(pb.rows, NAN);
  o.probs.assign((size_t)pb.rows * pb.V, NAN);
  a.tokens = o.tok.data(); a.argmax = o.amax.data(); a.logprobs = o.lp.data(); a.confidence = o.conf.data();
  a.margin = o.mar.data(); a.entropy = o.ent.data(); a.request_status = o.st.data();
  a.probs = o.probs.data(); a.probs_dtype = DDS_DTYPE_F32; a.probs_row_stride = pb.V;
  if (g_mask) { a.allowed_token_masks = pb.mask.data(); a.allowed_mask_stride = pb.mask_stride; }
}

int g_fb_total = 0, g_counter_bad = 0;
// The mode argument: "default", or the plan's overrides (dds::ksample::parse_plan_overrides keys)
// and ban=N, comma-separated.
void parse_mode(const char* s) {
  std::string plan;
  for (const char* p = s; *p;) {
    const char* e = strchr(p, ',');
    std::string item(p, e ? (size_t)(e - p) : strlen(p));
    if (item.rfind("ban=", 0) == 0) g_ban = atoi(item.c_str() + 4);
    else if (item.rfind("hostile=", 0) == 0) g_hostile = atoi(item.c_str() + 8);
    else if (item.rfind("mask=", 0) == 0) g_mask = atoi(item.c_str() + 5);
    else if (item.rfind("wide=", 0) == 0) g_wide = atoi(item.c_str() + 5);
    else if (item.rfind("case=", 0) == 0) g_case = atoi(item.c_str() + 5);
    else if (item.rfind("zeros=", 0) == 0) g_zeros = atoi(item.c_str() + 6);
    else if (item.rfind("ties=", 0) == 0) g_ties = atoi(item.c_str() + 5);
    else if (item.rfind("digit=", 0) == 0) g_digit = atoi(item.c_str() + 6);
    else if (item.rfind("sfrows=", 0) == 0) g_sf_min = atoi(item.c_str() + 7);
    else plan += (plan.empty() ? "" : ",") + item;
    p = e ? e + 1 : p + strlen(p);
  }
  const char* err = nullptr;
  if (!parse_plan_overrides(plan.c_str(), &g_plan, &err)) { fprintf(stderr, "bad mode %s\n", err); exit(2); }
}

// The CUDA backend's path: the parameter block and the shape from the arguments
// (src/sample_params.h), the plan (kernels/sample/plan.h, with the H200's SM count), then the
// library's own launcher (launch_sample) with the kernels run by the emulation.
void run_emu(const dds_sample_args& a, int V, std::vector<unsigned char>& ws_store) {
  SampleParams P = dds::sample_params(a, V);
  const SampleWorkspace w(a.num_rows, V);
  ws_store.assign(w.total, 0xA5);  // not zero at rest: the workspace is shared with dds_verify_drafts
  w.bind(P, reinterpret_cast<char*>(ws_store.data()));
  SamplePlanOverrides o = g_plan;
  // (two CTAs for the fallback rows unless the mode says otherwise: the grid-stride loop)
  if (o.filter_grid < 0) o.filter_grid = 2;
  const SamplePlan plan = plan_sample(dds::sample_shape(a, V, kDefaultSms), o);
  const void* filter_kernels[] = {
      (const void*)&filter_kernel<0, false, false>, (const void*)&filter_kernel<1, false, false>,
      (const void*)&filter_kernel<0, true, false>,  (const void*)&filter_kernel<1, true, false>,
      (const void*)&filter_kernel<0, false, true>,  (const void*)&filter_kernel<1, false, true>,
      (const void*)&filter_kernel<0, true, true>,   (const void*)&filter_kernel<1, true, true>};
  // (split_finish_hist_kernel: the finish and split_hist_kernel's work in one launch)
  const void* split_kernels[] = {(const void*)&split_hist_kernel<0>, (const void*)&split_hist_kernel<1>,
                                 (const void*)&split_bound_kernel<0>, (const void*)&split_bound_kernel<1>,
                                 (const void*)&split_finish_hist_kernel<0>, (const void*)&split_finish_hist_kernel<1>};
  int split_launches = 0;
  std::vector<int> fb_rows;  // the fallback list as filter_kernel found it (it resets the count)
  g_emu_before_launch = [&](const void* k) {
    for (const void* sk : split_kernels) split_launches += k == sk ? 1 : 0;
    if (std::find(std::begin(filter_kernels), std::end(filter_kernels), k) == std::end(filter_kernels) ||
        plan.direct_filter)
      return;
    g_fb_total += *P.fb_count;
    fb_rows.assign(P.fb_rows, P.fb_rows + *P.fb_count);
    fprintf(stderr, "  fallback rows: %d of %d:", *P.fb_count, a.num_rows);
    for (int i = 0; i < *P.fb_count; ++i) {
      fprintf(stderr, " %d", case_of(P.fb_rows[i]));
      // (with the split finish: the row and its candidate set's size)
      if (plan.split_finish)
        fprintf(stderr, " (row %d, |S| %u)", P.fb_rows[i], P.split_cnt[P.fb_rows[i]].ns);
    }
    fprintf(stderr, "\n");
  };
  launch_sample(a.dtype, P, plan, nullptr);
  g_emu_before_launch = nullptr;
  if (plan.split_finish) {  // every row's candidate set (0: an unfiltered row)
    fprintf(stderr, "  split finish |S| by row:");
    for (int r = 0; r < a.num_rows; ++r) fprintf(stderr, " %u", P.split_cnt[r].ns);
    fprintf(stderr, "\n");
  }
  // The split fallback: both its kernels launched (the histograms inside the finish's launch with
  // plan.split_spec), and the fallback rows it took (their records in the
  // workspace, which filter_kernel finished from).
  g_sf_rows = -1;
  if (split_launches == 2) {
    g_sf_rows = 0;
    // (the fallback list's rows: with plan.split_spec the histograms ran for every top-p row)
    for (int r : fb_rows) g_sf_rows += P.sf_rows[r].ok ? 1 : 0;
    fprintf(stderr, "  split fallback rows: %d%s\n", g_sf_rows,
            plan.split_spec ? " (histograms beside the finish)" : "");
  } else if (split_launches != 0) {
    fprintf(stderr, "  split fallback: %d of its 2 kernels launched\n", split_launches);
    g_counter_bad = 1;
  }
  if (plan.zero_fallback && (*P.fb_count != 0 || *P.fb_done != 0)) {
    fprintf(stderr, "  FB COUNTERS NOT RESET\n");
    g_counter_bad = 1;
  }
}

bool close(float g, float c, double rel = 1e-5, double abs_tol = 1e-6) {
  if (std::isnan(g) || std::isnan(c)) return false;
  if (g == c) return true;
  if (std::isinf(g) || std::isinf(c)) return false;
  return std::fabs((double)g - (double)c) <= rel * std::fabs((double)c) + abs_tol;
}

// Bitwise equality of two plans' outputs (every output, probs included); returns the rows that differ.
int same_bits(const Out& x, const Out& y, int rows, int V) {
  int bad = 0;
  for (int i = 0; i < rows; ++i) {
    bool ok = x.tok[i] == y.tok[i] && x.amax[i] == y.amax[i] && x.st[i] == y.st[i] &&
              !memcmp(&x.lp[i], &y.lp[i], 4) && !memcmp(&x.conf[i], &y.conf[i], 4) &&
              !memcmp(&x.mar[i], &y.mar[i], 4) && !memcmp(&x.ent[i], &y.ent[i], 4) &&
              !memcmp(&x.probs[(size_t)i * V], &y.probs[(size_t)i * V], 4 * (size_t)V);
    if (!ok) {
      ++bad;
      printf("row %d (case %d): the two plans differ: tok %d/%d lp %a/%a ent %a/%a\n", i, case_of(i), x.tok[i],
             y.tok[i], x.lp[i], y.lp[i], x.ent[i], y.ent[i]);
    }
  }
  return bad;
}

// The row pass's min-p floor (minp_floor, kernels/sample/select.cuh) against the finish's threshold
// over random block maxima, temperatures and min-p values: the floor lies at or below M, and its
// tempered value just below it (the finish's Ua for a row whose top block lists from its floor)
// stays below minp_threshold of the row maximum M, so such a row settles. Returns the violations.
int check_minp_floor() {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  int bad = 0, n = 0;
  for (int i = 0; i < 200000; ++i) {
    const float M = (u(rng) - 0.5f) * std::pow(10.f, (float)(int)(u(rng) * 9.f) - 2.f);
    const float invT = std::pow(10.f, u(rng) * 6.f - 3.f);
    const float minp = i % 7 == 0 ? 1.f : std::pow(10.f, -u(rng) * 8.f);
    const float f = minp_floor(M, invT, logf(minp));
    if (f == -FLT_MAX) continue;
    ++n;
    const float m = dds::row::temper(M, invT);
    const float amin = minp_threshold(m, (double)m, minp);
    const float ua = dds::row::temper(nextafterf(f, -INFINITY), invT);
    if (!(f <= M) || !(ua < amin)) {
      if (++bad <= 5) printf("minp_floor: M %.9g invT %.9g minp %.9g: floor %.9g, Ua %.9g, amin %.9g\n", M, invT, minp, f, ua, amin);
    }
  }
  if (n < 100000) { printf("minp_floor: only %d of 200000 draws have a floor\n", n); ++bad; }
  printf("minp_floor: %d draws with a floor, %d violations\n", n, bad);
  return bad;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "minp_floor") return check_minp_floor() ? 1 : 0;
  int V = argc > 1 ? atoi(argv[1]) : 5000, rows = argc > 2 ? atoi(argv[2]) : 36;
  int dtype = argc > 3 ? atoi(argv[3]) : 0, stats = argc > 4 ? atoi(argv[4]) : DDS_STATS_PROCESSED;
  if (argc > 5) g_tscale = atof(argv[5]);
  std::string mode_b;
  if (argc > 6) {
    std::string m = argv[6];
    const size_t bar = m.find('|');
    if (bar != std::string::npos) {
      mode_b = m.substr(bar + 1);
      m = m.substr(0, bar);
    }
    parse_mode(m.c_str());
  }
  if (g_hostile >= 0 && rows != hostile::kRows) { printf("hostile=K needs %d rows\n", hostile::kRows); return 2; }
  Prob pb = make(V, rows, dtype, 1234 + V, stats);
  make_masks(pb);
  dds_sampler_config c; dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU; c.vocab_size = V; c.max_rows = rows; c.max_requests = rows;
  dds_sampler* s; if (dds_create(&c, &s) != DDS_OK) { printf("create failed\n"); return 1; }
  Out oc, og; dds_sample_args a;
  fill_args(a, pb, oc);
  if (dds_sample(s, &a, nullptr) != DDS_OK) { printf("cpu failed %s\n", dds_last_error()); return 1; }
  fill_args(a, pb, og);
  std::vector<unsigned char> ws;
  run_emu(a, V, ws);
  const int sf_rows = g_sf_rows;
  int bad = 0;
  if (g_sf_min >= 0 && sf_rows < g_sf_min) {
    printf("the split fallback took %d rows, fewer than sfrows=%d\n", sf_rows, g_sf_min);
    ++bad;
  }
  for (int i = 0; i < rows; ++i) {
    bool ok = og.st[i] == oc.st[i] && og.tok[i] == oc.tok[i] && og.amax[i] == oc.amax[i] && close(og.lp[i], oc.lp[i]) && close(og.conf[i], oc.conf[i]) &&
              close(og.mar[i], oc.mar[i]) && close(og.ent[i], oc.ent[i]);
    int pbad = -1;
    for (int t = 0; t < V && ok; ++t) if (!close(og.probs[(size_t)i * V + t], oc.probs[(size_t)i * V + t])) { ok = false; pbad = t; }
    if (!ok) {
      ++bad;
      printf("row %d (case %d): tok %d/%d amax %d/%d lp %g/%g conf %g/%g mar %g/%g ent %g/%g probs@%d\n", i, case_of(i), og.tok[i], oc.tok[i],
             og.amax[i], oc.amax[i], og.lp[i], oc.lp[i], og.conf[i], oc.conf[i], og.mar[i], oc.mar[i], og.ent[i], oc.ent[i], pbad);
    }
  }
  if (g_mask) {  // the masks took effect: all-zero rows empty, every other token allowed
    for (int i = 0; i < rows; ++i) {
      const int32_t* m = pb.mask.data() + (size_t)i * pb.mask_stride;
      const bool empty = (og.st[i] & DDS_REQ_EMPTY_ROW) != 0;
      const bool ok = (i % 9 == 4) ? empty && og.tok[i] == 0
                                   : empty || ((uint32_t)m[og.tok[i] >> 5] >> (og.tok[i] & 31)) & 1u;
      if (!ok) {
        ++bad;
        printf("row %d: token %d status %d against its mask\n", i, og.tok[i], og.st[i]);
      }
    }
  }
  int diff = 0;
  if (!mode_b.empty()) {  // the second plan, bit for bit against the first
    Out ob;
    fill_args(a, pb, ob);
    g_plan = SamplePlanOverrides{};
    parse_mode(mode_b.c_str());
    run_emu(a, V, ws);
    diff = same_bits(og, ob, rows, V);
    bad += diff;
  }
  char sf[48] = "";
  if (sf_rows >= 0) snprintf(sf, sizeof sf, " (split %d)", sf_rows);
  printf("V=%d rows=%d dtype=%d stats=%d mode=%s: %d bad rows, fallback %d%s%s%s\n", V, rows, dtype,
         stats, argc > 6 ? argv[6] : "default", bad, g_fb_total, sf,
         g_counter_bad ? ", COUNTERS NOT RESET" : "",
         mode_b.empty() ? "" : (diff ? ", PLANS DIFFER" : ", plans equal bit for bit"));
  return (bad || g_counter_bad) ? 1 : 0;
}
