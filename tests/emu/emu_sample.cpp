// Host-emulated CUDA dds_sample kernels (kernels/sample.cuh, see run_sample.sh) against the CPU
// backend: a mixed batch of 22 row kinds (top-k / top-p / min-p / greedy / guided / ties / flat /
// -inf / NaN rows, per-request arrays), every output incl. probs compared (tokens, argmax, status
// exact; statistics within 1e-5 relative). The dispatch fields of the parameter block follow
// src/cuda_sample.cu unless the mode argument forces them (fuse, top2, approx, direct).
// Usage: emu_sample V rows dtype(0 f32, 1 bf16) stats(0 processed, 1 guided) [tscale [mode]]
//   mode: comma list of fuse=0|1, top2=0|1, approx=0|1, direct=0|1, fbpw=N, srow=0|1, small=0|1
//   (small_plain_kernel for V <= 2048), ban=N (the banned token, default 3), exactall=1
//   (small_plain_kernel scores every column exactly: its rare path), cta=0|1 (small_plain_kernel and
//   small_filter_kernel with a warp / a CTA per row), sfilt=0|1 (small_filter_kernel for the filtered rows of
//   V <= 2048), ctalist=0|1 (filter_kernel's in-CTA candidate list, default 1 as on the GPU) (default:
//   the library's rule)
#include "cuda_emu_sample.h"
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;
#include <cstdio>
#include <random>
#include <dds/dds.h>
#include "dtype.h"
#include "sample_emu.cuh"
using namespace dds::ksample;
static const float kInf = INFINITY;

struct Prob {
  int V, rows, dtype;
  std::vector<uint16_t> lg16; std::vector<float> lg32;
  std::vector<float> ucd;  // f32 uncond (dtype f32 only used when dtype == 0)
  std::vector<int32_t> offs, pos, K, uoffs;
  std::vector<float> T, G, P, MP;
  std::vector<uint64_t> seeds; std::vector<uint32_t> steps;
  int stats;
};

float g_tscale = 1.f;
Prob make(int V, int rows, int dtype, uint64_t seed, int stats) {
  std::mt19937_64 rng(seed);
  Prob pb; pb.V = V; pb.rows = rows; pb.dtype = dtype; pb.stats = stats;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  for (int r = 0; r <= rows; ++r) pb.offs.push_back(r);
  std::vector<float> lg((size_t)rows * V), uc((size_t)rows * V);
  for (int r = 0; r < rows; ++r) {
    float T = 1.f, g = 0.f, p = 1.f, mp = 0.f, sigma = 2.f;
    int k = 0, uo = -1, kind = 0;
    switch (r % 22) {
      case 0: k = 50; break;
      case 1: k = 1; break;
      case 2: k = 1024; break;
      case 3: p = 0.9f; sigma = 8.f; break;
      case 4: p = 0.9f; kind = 1; break;
      case 5: mp = 0.05f; break;
      case 6: T = 0.7f; k = 50; p = 0.9f; mp = 0.02f; break;
      case 7: T = 1.3f; p = 0.5f; sigma = 4.f; break;
      case 8: k = 20; kind = 2; break;
      case 9: p = 0.f; kind = 4; break;
      case 10: k = V - 1; break;
      case 11: mp = 0.9f; sigma = 8.f; break;
      case 12: p = 0.9f; sigma = 4.f; break;
      case 13: T = 0.8f; k = 5; g = 1.5f; uo = r; break;
      case 14: break;
      case 15: T = 0.f; k = 50; break;
      case 16: k = 50; p = 0.95f; kind = 3; break;
      case 17: k = 3; mp = 0.1f; kind = 4; break;
      case 18: p = 0.9f; kind = 5; break;
      case 19: k = 50; kind = 6; break;
      // Wide nuclei on sigma-2 rows: the candidates cannot settle them (filter kernel's
      // boundary pass: the columns above the boundary digit summed, the digit's listed).
      case 20: p = 0.9f; break;
      case 21: T = 0.8f; p = 0.95f; mp = 0.002f; break;
    }
    if (T > 0.f) T *= g_tscale;
    pb.T.push_back(T); pb.G.push_back(g); pb.P.push_back(p); pb.MP.push_back(mp); pb.K.push_back(k);
    pb.uoffs.push_back(uo); pb.seeds.push_back(rng()); pb.steps.push_back(rng() % 100);
    pb.pos.push_back(rng() % 100000);
    for (int t = 0; t < V; ++t) {
      float v = sigma * nd(rng);
      if (kind == 1) v = 0.25f;
      if (kind == 2) v = std::round(v * 2.f) / 2.f;
      if (kind == 3) v = (rng() % 5000 == 0 || t == V / 2) ? v : -kInf;
      if (kind == 4) v = (t % 3 == 0) ? 5.f : std::min(v, 4.f);
      if (kind == 5) v = (t % 2) ? -kInf : NAN;
      if (kind == 6 && t % 7 == 0) v = NAN;
      if (kind != 3 && ud(rng) < 0.01f) v = -kInf;
      lg[(size_t)r * V + t] = v;
      uc[(size_t)r * V + t] = 2.f * nd(rng);
    }
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

struct Mode { int fuse = -1, top2 = -1, approx = -1, direct = -1, fbpw = -1, srow = -1, small = -1, ban = 3, exactall = 0, cta = -1, sfilt = -1, ctalist = 1; } g_mode;
struct Out { std::vector<int32_t> tok, amax, st; std::vector<float> lp, conf, mar, ent, probs; };

void fill_args(dds_sample_args& a, Prob& pb, Out& o) {
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = pb.rows; a.num_requests = pb.rows; a.row_offsets = pb.offs.data(); a.positions = pb.pos.data();
  a.logits = pb.dtype == 1 ? (const void*)pb.lg16.data() : (const void*)pb.lg32.data();
  a.dtype = pb.dtype == 1 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32; a.row_stride = pb.V;
  a.uncond_logits = pb.ucd.data(); a.uncond_row_stride = pb.V; a.uncond_num_rows = pb.rows; a.uncond_row_offsets = pb.uoffs.data();
  a.guidance_scales = pb.G.data(); a.temperatures = pb.T.data(); a.top_ks = pb.K.data(); a.top_ps = pb.P.data(); a.min_ps = pb.MP.data();
  a.seeds = pb.seeds.data(); a.steps = pb.steps.data(); a.banned_token = g_mode.ban; a.stats = pb.stats;
  o.tok.assign(pb.rows, -7); o.amax.assign(pb.rows, -7); o.st.assign(pb.rows, -7);
  o.lp.assign(pb.rows, NAN); o.conf.assign(pb.rows, NAN); o.mar.assign(pb.rows, NAN); o.ent.assign(pb.rows, NAN);
  o.probs.assign((size_t)pb.rows * pb.V, NAN);
  a.tokens = o.tok.data(); a.argmax = o.amax.data(); a.logprobs = o.lp.data(); a.confidence = o.conf.data();
  a.margin = o.mar.data(); a.entropy = o.ent.data(); a.request_status = o.st.data();
  a.probs = o.probs.data(); a.probs_dtype = DDS_DTYPE_F32; a.probs_row_stride = pb.V;
}

int g_fb_total = 0, g_counter_bad = 0;
void parse_mode(const char* s) {
  for (const char* p = s; *p;) {
    int* f = nullptr;
    if (!strncmp(p, "fuse=", 5)) f = &g_mode.fuse;
    else if (!strncmp(p, "top2=", 5)) f = &g_mode.top2;
    else if (!strncmp(p, "approx=", 7)) f = &g_mode.approx;
    else if (!strncmp(p, "direct=", 7)) f = &g_mode.direct;
    else if (!strncmp(p, "fbpw=", 5)) f = &g_mode.fbpw;
    else if (!strncmp(p, "srow=", 5)) f = &g_mode.srow;
    else if (!strncmp(p, "small=", 6)) f = &g_mode.small;
    else if (!strncmp(p, "ban=", 4)) f = &g_mode.ban;
    else if (!strncmp(p, "exactall=", 9)) f = &g_mode.exactall;
    else if (!strncmp(p, "cta=", 4)) f = &g_mode.cta;
    else if (!strncmp(p, "sfilt=", 6)) f = &g_mode.sfilt;
    else if (!strncmp(p, "ctalist=", 8)) f = &g_mode.ctalist;
    else if (!strncmp(p, "default", 7)) { p += 7; if (*p == ',') ++p; continue; }
    if (!f) { fprintf(stderr, "bad mode %s\n", p); exit(2); }
    p = strchr(p, '=') + 1;
    *f = atoi(p);
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
}
template <int DT>
void run_emu(const dds_sample_args& a, int V, std::vector<unsigned char>& ws_store) {
  SampleParams P{};
  P.V = V; P.nblocks = (V + 1023) / 1024; P.num_rows = a.num_rows; P.num_requests = a.num_requests;
  P.row_offsets = a.row_offsets; P.positions = a.positions; P.logits = a.logits; P.row_stride = a.row_stride;
  P.uncond = a.uncond_logits; P.uncond_stride = a.uncond_row_stride; P.uncond_num_rows = a.uncond_num_rows;
  P.uncond_row_offsets = a.uncond_row_offsets; P.gs = a.guidance_scales; P.temps = a.temperatures;
  P.ks = a.top_ks; P.ps = a.top_ps; P.minps = a.min_ps; P.seeds = a.seeds; P.steps = a.steps; P.banned = a.banned_token;
  P.stats_guided = a.stats == DDS_STATS_GUIDED; P.want_stats = 1;
  P.tokens = a.tokens; P.logprobs = a.logprobs; P.argmax = a.argmax; P.confidence = a.confidence; P.margin = a.margin;
  P.entropy = a.entropy; P.probs = a.probs; P.probs_dtype = 0; P.probs_stride = a.probs_row_stride; P.request_status = a.request_status;
  { const size_t es = DT == 0 ? 4 : 2; P.vec_ok = ((uintptr_t)a.logits % 16 == 0 && (a.row_stride * es) % 16 == 0 && (uintptr_t)a.uncond_logits % 16 == 0) ? 1 : 0; }
  const size_t rows = a.num_rows, nb = P.nblocks;
  const int L = cand_cap_for(V);
  const int lvl0 = cand_lvl0_for(V);
  size_t need = rows * 4 + 16 + rows * nb * sizeof(BlockRec) + rows * sizeof(RowInfo) + rows * nb * L * 8 + rows * nb * 8 + rows * 4 + 4096;
  if (ws_store.size() < need) ws_store.assign(need, 0);
  unsigned char* w = ws_store.data();
  auto take = [&](size_t n) { unsigned char* p = w; w += (n + 255) & ~(size_t)255; return p; };
  P.counters = (int*)take(rows * 4);
  unsigned char* fb = take(16);
  P.fb_count = (int*)fb; P.fb_done = (unsigned*)(fb + 4);
  P.recs = (BlockRec*)take(rows * nb * sizeof(BlockRec));
  P.rowinfo = (RowInfo*)take(rows * sizeof(RowInfo));
  P.cand = (int2*)take(rows * nb * L * 8); P.cand_cap = L; P.cand_lvl0 = lvl0;
  P.kmass = (unsigned long long*)take(rows * nb * 8);
  P.fb_rows = (int*)take(rows * 4);
  // Dispatch fields by the library's default rules (kernels/sample.cuh), unless the mode forces
  // them.
  P.bpw = plain_bpw(P.num_rows, P.nblocks);
  const int wpr = (P.nblocks + P.bpw - 1) / P.bpw;
  P.fuse_finish = g_mode.fuse >= 0 ? g_mode.fuse : plain_fuse_default(P.num_rows, P.nblocks);
  P.block_approx = g_mode.approx >= 0 ? g_mode.approx : 1;
  P.direct_filter = g_mode.direct >= 0 ? g_mode.direct : 0;
  P.pass_top2 = g_mode.top2 >= 0 ? g_mode.top2 : pass_top2_default(P.num_rows, P.nblocks);
  P.small_plain = (g_mode.small >= 0 ? g_mode.small : 1) && P.nblocks <= 2;
  if (P.small_plain) P.fuse_finish = 0;
  P.small_exact_all = g_mode.exactall;
  memset(P.counters, 0, rows * 4);  // (the memset node of a fused call with several warps per row)
  P.small_cta = g_mode.cta >= 0 ? g_mode.cta : small_cta_default(P.num_rows, 132);
  if (P.small_plain && P.small_cta) {
    const unsigned grid = (unsigned)P.num_rows;
    switch (small_groups_for<DT>(V)) {
      case 0: emu_launch(grid, 256, [&] { small_plain_kernel<DT, 0, true>(P); }); break;
      case 1: emu_launch(grid, 256, [&] { small_plain_kernel<DT, 1, true>(P); }); break;
      default: emu_launch(grid, 256, [&] { small_plain_kernel<DT, 32 / Elt<DT>::VEC, true>(P); }); break;
    }
  } else if (P.small_plain) {
    const unsigned grid = (unsigned)((P.num_rows + 7) / 8);
    switch (small_groups_for<DT>(V)) {
      case 0: emu_launch(grid, 256, [&] { small_plain_kernel<DT, 0, false>(P); }); break;
      case 1: emu_launch(grid, 256, [&] { small_plain_kernel<DT, 1, false>(P); }); break;
      default: emu_launch(grid, 256, [&] { small_plain_kernel<DT, 32 / Elt<DT>::VEC, false>(P); }); break;
    }
  } else {
    const long long pw = (long long)P.num_rows * wpr;
    if (P.fuse_finish) {
      emu_launch((unsigned)((pw + 7) / 8), 256, [&] { plain_pass_kernel<DT, true>(P); });
    } else {
      emu_launch((unsigned)((pw + 7) / 8), 256, [&] { plain_pass_kernel<DT, false>(P); });
      if (P.num_rows >= 1024) emu_launch((unsigned)((P.num_rows + 7) / 8), 256, [&] { plain_finish_warp_kernel<DT>(P); });
      else emu_launch((unsigned)P.num_rows, 256, [&] { plain_finish_kernel<DT>(P); });
    }
  }
  // (srow=0: the filter kernel reads the row from global memory and lists in shared memory, as
  // for V > kSmemRowMax)
  P.smem_row = g_mode.srow >= 0 ? g_mode.srow : V <= kSmemRowMax;
  P.small_filter = (g_mode.sfilt >= 0 ? g_mode.sfilt : 1) && P.nblocks <= 2 && !P.direct_filter;
  P.small_filter_cta = g_mode.cta >= 0 ? g_mode.cta : small_filter_cta_default(P.num_rows, 132);
  if (P.small_filter && P.small_filter_cta) {  // (cta=0|1 forces the form of both small kernels)
    const unsigned grid = (unsigned)P.num_rows;
    switch (small_groups_for<DT>(V)) {
      case 0: emu_launch(grid, 256, [&] { small_filter_kernel<DT, 0, true>(P); }); break;
      case 1: emu_launch(grid, 256, [&] { small_filter_kernel<DT, 1, true>(P); }); break;
      default: emu_launch(grid, 256, [&] { small_filter_kernel<DT, 32 / Elt<DT>::VEC, true>(P); }); break;
    }
  } else if (P.small_filter) {
    const unsigned grid = (unsigned)((P.num_rows + kSmallFiltWarps - 1) / kSmallFiltWarps);
    switch (small_groups_for<DT>(V)) {
      case 0: emu_launch(grid, kSmallFiltWarps * 32, [&] { small_filter_kernel<DT, 0, false>(P); }); break;
      case 1: emu_launch(grid, kSmallFiltWarps * 32, [&] { small_filter_kernel<DT, 1, false>(P); }); break;
      default: emu_launch(grid, kSmallFiltWarps * 32, [&] { small_filter_kernel<DT, 32 / Elt<DT>::VEC, false>(P); }); break;
    }
  } else if (!P.direct_filter) {
    // (fbpw=N forces N blocks per warp: the emulation's batches are too small for the rule to)
    P.fbpw = g_mode.fbpw > 0 && DT != 0 ? g_mode.fbpw  // (row_pass_kernel<f32> takes one)
                                          : filtered_bpw(DT, P.num_rows, P.nblocks, kFilteredBpwMax);
    const long long warps = (long long)rows * ((nb + P.fbpw - 1) / P.fbpw);
    emu_launch((unsigned)((warps + 7) / 8), 256, [&] { row_pass_kernel<DT>(P); });
    const int wpc = cand_finish_wpc(rows, 132);  // the library's rule (warps per CTA)
    emu_launch((unsigned)((rows + wpc - 1) / wpc), 32 * wpc, [&] { cand_finish_kernel<DT>(P); });
    g_fb_total += *P.fb_count;
    fprintf(stderr, "  fallback rows: %d of %zu:", *P.fb_count, rows);
    for (int i = 0; i < *P.fb_count; ++i) fprintf(stderr, " %d", P.fb_rows[i] % 20);
    fprintf(stderr, "\n");
    emu_launch(2, 1024, [&] { filter_kernel<DT>(P); });
    if (*P.fb_count != 0 || *P.fb_done != 0) { fprintf(stderr, "  FB COUNTERS NOT RESET\n"); g_counter_bad = 1; }
  } else {
    emu_launch((unsigned)rows, 1024, [&] { filter_kernel<DT>(P); });
  }
  const int chunks = (V + kProbsChunk - 1) / kProbsChunk;
  emu_launch((unsigned)(rows * chunks), 256, [&] { probs_kernel<DT>(P, chunks); });
  emu_launch((unsigned)((P.num_requests + 127) / 128), 128, [&] { status_kernel(P); });
}

bool close(float g, float c, double rel = 1e-5, double abs_tol = 1e-6) {
  if (std::isnan(g) || std::isnan(c)) return false;
  if (g == c) return true;
  if (std::isinf(g) || std::isinf(c)) return false;
  return std::fabs((double)g - (double)c) <= rel * std::fabs((double)c) + abs_tol;
}

int main(int argc, char** argv) {
  int V = argc > 1 ? atoi(argv[1]) : 5000, rows = argc > 2 ? atoi(argv[2]) : 36;
  int dtype = argc > 3 ? atoi(argv[3]) : 0, stats = argc > 4 ? atoi(argv[4]) : DDS_STATS_PROCESSED;
  if (argc > 5) g_tscale = atof(argv[5]);
  if (argc > 6) parse_mode(argv[6]);
  kFilterCtaList = g_mode.ctalist != 0;
  Prob pb = make(V, rows, dtype, 1234 + V, stats);
  dds_sampler_config c; dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU; c.vocab_size = V; c.max_rows = rows; c.max_requests = rows;
  dds_sampler* s; if (dds_create(&c, &s) != DDS_OK) { printf("create failed\n"); return 1; }
  Out oc, og; dds_sample_args a;
  fill_args(a, pb, oc);
  if (dds_sample(s, &a, nullptr) != DDS_OK) { printf("cpu failed %s\n", dds_last_error()); return 1; }
  fill_args(a, pb, og);
  std::vector<unsigned char> ws;
  if (dtype == 1) run_emu<1>(a, V, ws); else run_emu<0>(a, V, ws);
  int bad = 0;
  for (int i = 0; i < rows; ++i) {
    bool ok = og.st[i] == oc.st[i] && og.tok[i] == oc.tok[i] && og.amax[i] == oc.amax[i] && close(og.lp[i], oc.lp[i]) && close(og.conf[i], oc.conf[i]) &&
              close(og.mar[i], oc.mar[i]) && close(og.ent[i], oc.ent[i]);
    int pbad = -1;
    for (int t = 0; t < V && ok; ++t) if (!close(og.probs[(size_t)i * V + t], oc.probs[(size_t)i * V + t])) { ok = false; pbad = t; }
    if (!ok) {
      ++bad;
      printf("row %d (case %d): tok %d/%d amax %d/%d lp %g/%g conf %g/%g mar %g/%g ent %g/%g probs@%d\n", i, i % 20, og.tok[i], oc.tok[i],
             og.amax[i], oc.amax[i], og.lp[i], oc.lp[i], og.conf[i], oc.conf[i], og.mar[i], oc.mar[i], og.ent[i], oc.ent[i], pbad);
    }
  }
  printf("V=%d rows=%d dtype=%d stats=%d mode=%s: %d bad rows, fallback %d, CTA list %d%s\n", V, rows, dtype,
         stats, argc > 6 ? argv[6] : "default", bad, g_fb_total, g_emu_ctalist_rows.load(),
         g_counter_bad ? ", COUNTERS NOT RESET" : "");
  return (bad || g_counter_bad) ? 1 : 0;
}
