// Host-emulated CUDA vocabulary-parallel kernels (kernels/shard/, see run_shard.sh) against the
// CPU backend: the same protocol run with both, R simulated ranks; records (integer fields, values
// within rounding) and outputs (tokens, statistics, probs) compared.
#include <cuda_runtime.h>  // tests/emu/include: the emulated CUDA runtime
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
EmuBlock* g_blk;

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <random>

#include <dds/dds.h>
#include <dds/dds_shard.h>

#include "common/dtype.h"

// (__launch_bounds__(...), uint4, bit casts, __ballot_sync: cuda_emu.h)
inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  for (unsigned b = base; b < 32; ++b)
    if ((mask >> b) & 1u)
      if (--offset == 0) return b;
  return 0xffffffffu;
}

#include "shard/launch.cuh"
#include "shard_params.h"

// The CUDA backend's two entry points (src/cuda_shard.cu) without its device guard: the
// kernels' own launchers.
namespace dds {
inline dds_status cuda_shard_partial(const shard::Call& c, int32_t round, void* out, int, dds_stream s) {
  kshard::launch_partial(c, round, static_cast<unsigned char*>(out), (cudaStream_t)s);
  return DDS_OK;
}
inline dds_status cuda_shard_finish(const shard::Call& c, int, dds_stream s) {
  kshard::launch_finish(c, (cudaStream_t)s);
  return DDS_OK;
}
}  // namespace dds

using namespace dds;

namespace {

struct Cfg {
  const char* name;
  float T;
  int k;
  float p, mp;
  bool guided;
  int stats;
};
const Cfg kCfg[] = {
    {"plain", 1.f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"temp", 0.7f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"greedy", 0.f, 0, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-k 50", 1.f, 50, 1.f, 0.f, false, DDS_STATS_PROCESSED},
    {"top-p 0.9", 1.f, 0, 0.9f, 0.f, false, DDS_STATS_PROCESSED},
    {"min-p", 1.f, 0, 1.f, 0.05f, false, DDS_STATS_PROCESSED},
    {"k+p+minp", 0.8f, 60, 0.95f, 0.02f, false, DDS_STATS_PROCESSED},
    {"guided top-p", 1.f, 0, 0.9f, 0.f, true, DDS_STATS_PROCESSED},
    {"guided stats", 0.9f, 20, 1.f, 0.f, true, DDS_STATS_GUIDED},
};

dds_sampler* mk(int V, int rows) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = DDS_BACKEND_CPU;
  c.vocab_size = V;
  c.max_rows = rows;
  c.max_requests = rows;
  dds_sampler* s;
  if (dds_create(&c, &s) != DDS_OK) {
    printf("create failed\n");
    exit(1);
  }
  return s;
}

std::vector<float> make_logits(int V, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x((size_t)rows * V);
  for (int r = 0; r < rows; ++r) {
    float* p = &x[(size_t)r * V];
    const int kind = r % 8;
    std::normal_distribution<float> nd(0.f, kind == 1 ? 3.f : kind == 2 ? 8.f : 2.f);
    for (int t = 0; t < V; ++t) p[t] = nd(rng);
    if (kind == 3)
      for (int t = 0; t < V; ++t) p[t] = std::round(p[t] * 2.f) / 2.f;
    if (kind == 4)
      for (int t = 0; t < V; ++t)
        if (rng() % 3 == 0) p[t] = -INFINITY;
    if (kind == 5)
      for (int t = 0; t < V; ++t) p[t] = 0.5f;
    if (kind == 6) {
      for (int t = 0; t < V; ++t) p[t] = -INFINITY;
      p[(r * 977) % V] = 1.f;
    }
    if (kind == 7 && r % 16 == 15)
      for (int t = 0; t < V; ++t) p[t] = -INFINITY;
  }
  return x;
}

struct Outs {
  std::vector<int32_t> tok, amax, st;
  std::vector<float> lp, conf, mar, ent, probs;
  explicit Outs(int rows, int V) : tok(rows, -7), amax(rows, -7), st(rows, -7), lp(rows), conf(rows), mar(rows), ent(rows), probs((size_t)rows * V, -1.f) {}
  void attach(dds_sample_args* a, int off, int V) {
    a->tokens = tok.data();
    a->argmax = amax.data();
    a->request_status = st.data();
    a->logprobs = lp.data();
    a->confidence = conf.data();
    a->margin = mar.data();
    a->entropy = ent.data();
    a->probs = probs.data() + off;
    a->probs_dtype = DDS_DTYPE_F32;
    a->probs_row_stride = V;
  }
};

bool close(float x, float y) {
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs((double)x - (double)y) <= 1e-5 * std::fabs((double)y) + 1e-6;
}
bool closed(double x, double y) {
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs(x - y) <= 1e-5 * std::fabs(y) + 1e-9;
}

// mode 0: even split (unaligned), 1: block multiples, 2: random cuts, mostly narrower than a block.
int run_case(int V, int rows, int R, int mode, const Cfg& cfg, bool bf, uint64_t seed) {
  const bool unaligned = mode == 0;
  std::vector<float> lf = make_logits(V, rows, seed), uf = make_logits(V, rows, seed + 1);
  for (float& u : uf)
    if (u == -INFINITY) u = 0.f;
  std::vector<uint16_t> lb(lf.size()), ub(uf.size());
  for (size_t e = 0; e < lf.size(); ++e) {
    lb[e] = f32_to_bf16(lf[e]);
    ub[e] = f32_to_bf16(uf[e]);
  }
  std::vector<uint64_t> seeds(rows);
  for (int r = 0; r < rows; ++r) seeds[r] = 1000 + seed * 131 + r;
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = rows;
  a.dtype = bf ? DDS_DTYPE_BF16 : DDS_DTYPE_F32;
  a.temperature = cfg.T;
  a.top_k = cfg.k;
  a.top_p = cfg.p;
  a.min_p = cfg.mp;
  a.step = 3;
  a.stats = cfg.stats;
  a.banned_token = V / 3;
  a.seeds = seeds.data();
  if (cfg.guided) {
    a.uncond_num_rows = rows;
    a.guidance_scale = 1.5f;
  }
  const size_t esz = bf ? 2 : 4;
  const char* L = bf ? (const char*)lb.data() : (const char*)lf.data();
  const char* U = bf ? (const char*)ub.data() : (const char*)uf.data();
  std::vector<int32_t> offs(R + 1);
  for (int r = 0; r <= R; ++r) offs[r] = (int32_t)((int64_t)V * r / R);
  if (mode == 1)
    for (int r = 1; r < R; ++r) offs[r] = std::max(offs[r - 1] + 1, std::min(V - (R - r), (offs[r] / 1024) * 1024));
  if (mode == 2) {
    std::mt19937_64 g(seed * 7);
    std::vector<int32_t> cuts;
    while ((int)cuts.size() < R - 1) {
      const int32_t c = 1 + (int32_t)(g() % (uint64_t)std::min(V - 1, 1500));
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    for (int r = 1; r < R; ++r) offs[r] = cuts[r - 1];
  }
  dds_sampler* s = mk(V, rows);
  std::vector<dds_sample_args> args(R, a);
  std::vector<dds_shard_args> sh(R);
  for (int r = 0; r < R; ++r) {
    args[r].logits = L + esz * offs[r];
    args[r].row_stride = V;
    if (cfg.guided) {
      args[r].uncond_logits = U + esz * offs[r];
      args[r].uncond_row_stride = V;
    }
    dds_shard_args_init(&sh[r], sizeof sh[r]);
    sh[r].rank = r;
    sh[r].world_size = R;
    sh[r].vocab_offset = offs[r];
    sh[r].vocab_slice = offs[r + 1] - offs[r];
    sh[r].max_top_k = 64;
  }
  dds_shard_plan plan;
  plan.struct_size = sizeof plan;
  if (dds_sample_shard_plan(s, &args[0], &sh[0], &plan) != DDS_OK) {
    printf("plan: %s\n", dds_last_error());
    exit(1);
  }
  std::vector<unsigned char> gc(plan.gathered_bytes), ge(plan.gathered_bytes);
  // The emulated calls.
  std::vector<shard::Call> calls(R);
  for (int r = 0; r < R; ++r) {
    shard::Call& c = calls[r];
    memset(&c, 0, sizeof c);
    c.a = shard_args(args[r]);
    c.V = V;
    c.off = sh[r].vocab_offset;
    c.Vs = sh[r].vocab_slice;
    c.rank = r;
    c.R = R;
    c.C = (int32_t)((plan.row_bytes[0] - (int64_t)sizeof(shard::StatsHead)) / 8);
    c.first_radix = -1;
    c.kept_round = -1;
    for (int q = 0; q < plan.num_rounds; ++q) {
      if (plan.round_kind[q] == DDS_SHARD_ROUND_RADIX && c.first_radix < 0) c.first_radix = q;
      if (plan.round_kind[q] == DDS_SHARD_ROUND_KEPT) c.kept_round = q;
      c.row_bytes[q] = plan.row_bytes[q];
      c.record_bytes[q] = plan.record_bytes[q];
      c.offset[q] = plan.gathered_offset[q];
    }
    c.gathered = ge.data();
  }
  int bad_rec = 0;
  for (int q = 0; q < plan.num_rounds; ++q) {
    for (int r = 0; r < R; ++r) {
      sh[r].round = q;
      std::vector<unsigned char> rc(plan.record_bytes[q]), re(plan.record_bytes[q]);
      if (dds_sample_partial(s, &args[r], &sh[r], gc.data(), rc.data(), nullptr) != DDS_OK) {
        printf("cpu partial: %s\n", dds_last_error());
        exit(1);
      }
      cuda_shard_partial(calls[r], q, re.data(), 0, nullptr);
      memcpy(gc.data() + plan.gathered_offset[q] + r * plan.record_bytes[q], rc.data(), rc.size());
      memcpy(ge.data() + plan.gathered_offset[q] + r * plan.record_bytes[q], re.data(), re.size());
      for (int i = 0; i < rows; ++i) {
        const unsigned char* pc = rc.data() + plan.row_bytes[q] * i;
        const unsigned char* pe = re.data() + plan.row_bytes[q] * i;
        bool ok = true;
        if (plan.round_kind[q] == DDS_SHARD_ROUND_STATS) {
          const auto& x = *reinterpret_cast<const shard::StatsHead*>(pc);
          const auto& y = *reinterpret_cast<const shard::StatsHead*>(pe);
          ok = x.magic == y.magic && x.n0 == y.n0 && x.n_cand == y.n_cand &&
               !memcmp(x.top_l_id, y.top_l_id, 8) && !memcmp(x.top_l, y.top_l, 8) &&
               !memcmp(x.top_a_id, y.top_a_id, 8) && !memcmp(x.top_a, y.top_a, 8) &&
               closed(x.zl, y.zl) && closed(x.za, y.za) && closed(x.wl, y.wl) && closed(x.wa, y.wa) &&
               x.share.m_ref == y.share.m_ref && x.share.full.block == y.share.full.block &&
               x.share.full.win.id == y.share.full.win.id && x.share.cut[0].block == y.share.cut[0].block &&
               x.share.cut[1].block == y.share.cut[1].block && x.share.cut[0].win.id == y.share.cut[0].win.id &&
               x.share.cut[1].win.id == y.share.cut[1].win.id && closed(x.share.cut[0].value, y.share.cut[0].value) &&
               closed(x.share.full.value, y.share.full.value) &&
               !memcmp(pc + sizeof x, pe + sizeof x, 8 * (size_t)x.n_cand);
          if (!ok && bad_rec < 3)
            printf("  STATS rank %d row %d: n0 %d/%d nc %d/%d ids %d,%d/%d,%d aid %d,%d/%d,%d za %.9g/%.9g full %d/%d win %d/%d cut %d,%d/%d,%d\n", r, i,
                   x.n0, y.n0, x.n_cand, y.n_cand, x.top_l_id[0], x.top_l_id[1], y.top_l_id[0], y.top_l_id[1],
                   x.top_a_id[0], x.top_a_id[1], y.top_a_id[0], y.top_a_id[1], x.za, y.za, x.share.full.block,
                   y.share.full.block, x.share.full.win.id, y.share.full.win.id, x.share.cut[0].block,
                   x.share.cut[1].block, y.share.cut[0].block, y.share.cut[1].block);
        } else if (plan.round_kind[q] == DDS_SHARD_ROUND_RADIX) {
          const auto& x = *reinterpret_cast<const shard::RadixRec*>(pc);
          const auto& y = *reinterpret_cast<const shard::RadixRec*>(pe);
          ok = !memcmp(x.count, y.count, sizeof x.count);
          for (int b = 0; b < 256 && ok; ++b) ok = closed(x.mass[b], y.mass[b]);
          if (!ok && bad_rec < 3) printf("  RADIX q %d rank %d row %d differs\n", q, r, i);
        } else {
          const auto& x = *reinterpret_cast<const shard::KeptRec*>(pc);
          const auto& y = *reinterpret_cast<const shard::KeptRec*>(pe);
          ok = x.count == y.count && closed(x.z, y.z) && closed(x.w, y.w) &&
               x.share.full.block == y.share.full.block && x.share.full.win.id == y.share.full.win.id &&
               x.share.cut[0].block == y.share.cut[0].block && x.share.cut[1].block == y.share.cut[1].block &&
               x.share.cut[0].win.id == y.share.cut[0].win.id && x.share.cut[1].win.id == y.share.cut[1].win.id;
          if (!ok && bad_rec < 3)
            printf("  KEPT rank %d row %d: count %d/%d z %.9g/%.9g full %d/%d win %d/%d\n", r, i, x.count, y.count, x.z,
                   y.z, x.share.full.block, y.share.full.block, x.share.full.win.id, y.share.full.win.id);
        }
        bad_rec += !ok;
      }
    }
  }
  // Finish: CPU (rank 0..R-1 into one probs buffer) and emulated.
  Outs oc(rows, V), oe(rows, V);
  for (int r = 0; r < R; ++r) {
    dds_sample_args ac = args[r];
    oc.attach(&ac, offs[r], V);
    if (dds_sample_finish(s, &ac, &sh[r], gc.data(), nullptr) != DDS_OK) {
      printf("cpu finish: %s\n", dds_last_error());
      exit(1);
    }
    dds_sample_args ae = args[r];
    oe.attach(&ae, offs[r], V);
    shard::Call ce = calls[r];
    ce.a = shard_args(ae);
    std::fill(oe.st.begin(), oe.st.end(), 0);
    cuda_shard_finish(ce, 0, nullptr);
  }
  int bad = 0;
  for (int i = 0; i < rows; ++i) {
    bool ok = oc.tok[i] == oe.tok[i] && oc.amax[i] == oe.amax[i] && oc.st[i] == oe.st[i] &&
              close(oe.lp[i], oc.lp[i]) && close(oe.conf[i], oc.conf[i]) && close(oe.mar[i], oc.mar[i]) &&
              close(oe.ent[i], oc.ent[i]);
    for (int t = 0; t < V && ok; ++t) ok = close(oe.probs[(size_t)i * V + t], oc.probs[(size_t)i * V + t]);
    if (!ok && bad < 3)
      printf("  row %d: tok %d/%d amax %d/%d st %d/%d lp %g/%g conf %g/%g ent %g/%g\n", i, oc.tok[i], oe.tok[i],
             oc.amax[i], oe.amax[i], oc.st[i], oe.st[i], oc.lp[i], oe.lp[i], oc.conf[i], oe.conf[i], oc.ent[i], oe.ent[i]);
    bad += !ok;
  }
  printf("V %d rows %d R %d %s %-12s %s: records differing %d, rows differing %d\n", V, rows, R,
         mode == 0 ? "even     " : mode == 1 ? "aligned  " : "random   ", cfg.name, bf ? "bf16" : "f32 ", bad_rec, bad);
  dds_destroy(s);
  return bad + bad_rec;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  const bool quick = argc > 1 && (!strcmp(argv[1], "--quick") || !strcmp(argv[1], "--big"));
  int bad = 0;
  uint64_t seed = 1;
  const int Rs[] = {1, 3, 4, 8};
  const int modes[] = {0, 0, 1, 2};
  for (int x = 0; x < 4; ++x)
    for (const Cfg& cfg : kCfg) {
      const int R = Rs[x];
      bad += run_case(R == 4 ? 4096 : 3001, 8, R, modes[x], cfg, seed % 2 == 0, seed);
      ++seed;
      if (quick && seed > 4) break;
    }
  if (argc > 1 && !strcmp(argv[1], "--big"))  // slices of many blocks (warp-strided merges)
    for (int x : {0, 3, 4, 6, 7}) {
      bad += run_case(70001, 8, 2, 0, kCfg[x], x % 2 == 0, 500 + x);
      bad += run_case(70001, 4, 1, 0, kCfg[x], x % 2 == 1, 600 + x);
    }
  printf("TOTAL bad %d\n", bad);
  return bad != 0;
}
