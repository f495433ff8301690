// dds_profile_ops: one call of dds_verify_drafts, dds_reveal or vocabulary-parallel sampling
// (dds_sample_partial / dds_sample_finish, every rank on one GPU) on one shape, its outputs written
// raw to a file, so that two builds of the library can be compared byte for byte (scripts/gpu/ab.sh
// cmp-ops runs this program of the new build with each build's libdds). Inputs are made on the
// host from fixed seeds, so both libraries (and both backends) see the same bytes.
//
//   dds_profile_ops verify f32|bf16 V requests drafts plain|topk|topp|minp [--cpu] [--dump FILE]
//   dds_profile_ops reveal rows requests policy [--cpu] [--dump FILE]     (policy 0..4, with canvas)
//   dds_profile_ops shard f32|bf16 V rows ranks plain|topk|topp|minp [--cpu] [--dump FILE]
//
// --cpu runs the CPU backend on host buffers (the same outputs, bit for bit, where the backends
// agree exactly). Prints one line: the operation, the shape and a checksum of the dump.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dds/dds.h>
#include <dds/dds_shard.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"  // make_sampler, shard_rank

namespace {

bool g_cpu = false;

[[noreturn]] void die(const char* what) {
  std::printf("dds_profile_ops: %s\n", what);
  std::exit(1);
}
// Deterministic host inputs: a 64-bit mix of (seed, index).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
float unit(uint64_t seed, uint64_t i) { return ((mix(seed * 0x100000001b3ull ^ i) >> 40) + 0.5f) / 16777216.f; }
float normal(uint64_t seed, uint64_t i) {
  const float u1 = unit(seed, 2 * i), u2 = unit(seed, 2 * i + 1);
  return std::sqrt(-2.f * std::log(u1)) * std::cos(6.2831853f * u2);
}

// n bytes from src to dst, buffers of this run (device, or host with --cpu) or the host's.
void copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (g_cpu) std::memcpy(dst, src, n);
  else BENCH_CHECK(cudaMemcpy(dst, src, n, kind));
}
// A buffer on the device (or the host with --cpu) holding a copy of `h`.
template <typename T>
T* to_dev(const std::vector<T>& h) {
  T* p = nullptr;
  if (g_cpu) {
    p = static_cast<T*>(std::malloc(h.size() * sizeof(T) + 1));
    if (!p) die("out of memory");
  } else if (cudaMalloc(&p, h.size() * sizeof(T) + 1) != cudaSuccess) {
    die("no CUDA device or out of memory");
  }
  if (!h.empty()) copy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}
template <typename T>
T* zeros(size_t n) {
  return to_dev(std::vector<T>(n));
}
// Appends n elements of device (or host) buffer p to the dump.
template <typename T>
void take(std::vector<unsigned char>& out, const T* p, size_t n) {
  const size_t at = out.size();
  out.resize(at + n * sizeof(T));
  copy(out.data() + at, p, n * sizeof(T), cudaMemcpyDeviceToHost);
}
// After an operation's last call: a device fault fails the run here instead of leaving outputs
// that compare equal (zeros).
void settle() {
  if (!g_cpu) BENCH_CHECK(cudaDeviceSynchronize());
}
// rows x V logits, sigma * N(0, 1) + shift[row] where given, as f32 or bf16 bytes.
void* make_logits(int bf16, size_t rows, int V, float sigma, uint64_t seed, const std::vector<float>* base = nullptr) {
  const size_t n = rows * (size_t)V;
  if (bf16) {
    std::vector<__nv_bfloat16> h(n);
    for (size_t i = 0; i < n; ++i)
      h[i] = __float2bfloat16(sigma * normal(seed, i) + (base ? (*base)[i % V] : 0.f));
    return to_dev(h);
  }
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = sigma * normal(seed, i) + (base ? (*base)[i % V] : 0.f);
  return to_dev(h);
}
dds_sampler* sampler(int V, int rows) {
  dds_sampler* s = make_sampler(g_cpu ? DDS_BACKEND_CPU : DDS_BACKEND_CUDA, V, rows);
  if (!s) std::exit(1);
  return s;
}
// The scenario's filters on a sample-like argument struct.
template <typename A>
void set_filters(A& a, const std::string& sc) {
  a.temperature = 1.f;
  if (sc == "topk") a.top_k = 50;
  else if (sc == "topp") a.top_p = 0.9f;
  else if (sc == "minp") a.min_p = 0.05f;
  else if (sc != "plain") die("scenario must be plain, topk, topp or minp");
  a.seed = 1234567;
  a.step = 7;
}

std::vector<unsigned char> run_verify(int bf16, int V, int R, int n, const std::string& sc) {
  // One peaked base over the columns; targets and drafts add their own noise, so drafts are often
  // accepted and sometimes rejected.
  std::vector<float> base(V);
  for (int v = 0; v < V; ++v) base[v] = 3.f * normal(99, v);
  void* target = make_logits(bf16, (size_t)R * (n + 1), V, 1.f, 11, &base);
  void* draft = make_logits(bf16, (size_t)R * n, V, 1.f, 12, &base);
  // Drafts: mostly one of the base's 8 best columns (likely accepted), else any column.
  std::vector<int32_t> best;
  for (int v = 0; v < V; ++v) {
    best.push_back(v);
    for (size_t j = best.size() - 1; j > 0 && base[best[j]] > base[best[j - 1]]; --j) std::swap(best[j], best[j - 1]);
    if (best.size() > 8) best.pop_back();
  }
  std::vector<int32_t> dt((size_t)R * n), cnt(R);
  for (size_t i = 0; i < dt.size(); ++i) {
    const uint64_t h = mix(777 + i);
    dt[i] = (h & 3) ? best[(h >> 8) % best.size()] : (int32_t)((h >> 8) % (uint64_t)V);
  }
  for (int r = 0; r < R; ++r) cnt[r] = (int)(mix(555 + r) % (uint64_t)(n + 1));
  int32_t* d_dt = to_dev(dt);
  int32_t* d_cnt = to_dev(cnt);
  int32_t* acc = zeros<int32_t>(R);
  int32_t* tok = zeros<int32_t>((size_t)R * (n + 1));
  float* lp = zeros<float>((size_t)R * (n + 1));
  int32_t* st = zeros<int32_t>(R);
  dds_sampler* s = sampler(V, R * (n + 1));
  dds_verify_args a;
  dds_verify_args_init(&a, sizeof a);
  a.num_requests = R;
  a.num_drafts = n;
  a.draft_counts = d_cnt;
  a.draft_tokens = d_dt;
  a.draft_logits = draft;
  a.target_logits = target;
  a.dtype = bf16 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32;
  set_filters(a, sc);
  a.accepted_counts = acc;
  a.out_tokens = tok;
  a.out_logprobs = lp;
  a.request_status = st;
  BENCH_DDS(dds_verify_drafts(s, &a, nullptr));
  settle();
  std::vector<unsigned char> out;
  take(out, acc, R);
  take(out, tok, (size_t)R * (n + 1));
  take(out, lp, (size_t)R * (n + 1));
  take(out, st, R);
  dds_destroy(s);
  return out;
}

std::vector<unsigned char> run_reveal(int rows, int R, int policy) {
  const int L = (rows + R - 1) / R + 8;  // canvas positions per request
  std::vector<int32_t> offs(R + 1), pos(rows), tokens(rows), canvas((size_t)R * L), counts(R), left(R);
  std::vector<float> scores(rows), thr(R);
  std::vector<uint8_t> elig(rows);
  for (int r = 0; r <= R; ++r) offs[r] = (int)((int64_t)rows * r / R);
  for (int r = 0; r < R; ++r) {
    for (int i = offs[r]; i < offs[r + 1]; ++i) {
      pos[i] = i - offs[r] + (int)(mix(31 + r) % 8);
      tokens[i] = (int32_t)(mix(41 + i) % 1000) + 2;
      scores[i] = (mix(51 + i) % 5 == 0) ? 0.5f : unit(61, i);  // ties among scores
      if (policy == 4) scores[i] = 3.f * unit(62, i);            // entropies
      elig[i] = (uint8_t)(mix(71 + i) % 7 != 0);
    }
    for (int p = 0; p < L; ++p) {
      const uint64_t h = mix(81 + (uint64_t)r * L + p);
      canvas[(size_t)r * L + p] = (h % 9 == 0) ? 1 : (h % 3 == 0) ? (int32_t)(h % 1000) + 2 : 0;
    }
    counts[r] = (int)(mix(91 + r) % 5) - 1;  // -1 .. 3 (<= 0: from steps_left)
    left[r] = (int)(mix(93 + r) % 4);
    thr[r] = 0.3f + 0.6f * unit(95, r);
  }
  int32_t* d_offs = to_dev(offs);
  int32_t* d_pos = to_dev(pos);
  int32_t* d_tok = to_dev(tokens);
  int32_t* d_canvas = to_dev(canvas);
  int32_t* d_counts = to_dev(counts);
  int32_t* d_left = to_dev(left);
  float* d_scores = to_dev(scores);
  float* d_thr = to_dev(thr);
  uint8_t* d_elig = to_dev(elig);
  uint8_t* rev = zeros<uint8_t>(rows);
  int32_t* nrev = zeros<int32_t>(R);
  int32_t* fin = zeros<int32_t>(R);
  int32_t* st = zeros<int32_t>(R);
  dds_sampler* s = sampler(1024, rows);
  dds_reveal_args a;
  dds_reveal_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = R;
  a.row_offsets = d_offs;
  a.positions = d_pos;
  a.scores = d_scores;
  a.eligible = d_elig;
  a.policy = policy;
  a.counts = d_counts;
  a.steps_left = d_left;
  a.thresholds = d_thr;
  a.factor = 1.f;
  a.position_temperature = policy == 0 ? 0.1f : 0.f;
  a.seed = 2024;
  a.step = 3;
  a.canvas = d_canvas;
  a.canvas_stride = L;
  a.canvas_length = L;
  a.tokens = d_tok;
  a.mask_token = 0;
  a.eos_token = 1;
  a.entropy_bound = 0.5f;
  a.reveal = rev;
  a.num_revealed = nrev;
  a.finished = fin;
  a.request_status = st;
  BENCH_DDS(dds_reveal(s, &a, nullptr));
  settle();
  std::vector<unsigned char> out;
  take(out, rev, rows);
  take(out, nrev, R);
  take(out, fin, R);
  take(out, st, R);
  take(out, d_canvas, (size_t)R * L);
  dds_destroy(s);
  return out;
}

std::vector<unsigned char> run_shard(int bf16, int V, int rows, int R, const std::string& sc) {
  void* logits = make_logits(bf16, rows, V, 2.f, 21);
  int32_t* tok = zeros<int32_t>(rows);
  int32_t* amax = zeros<int32_t>(rows);
  float* lp = zeros<float>(rows);
  float* conf = zeros<float>(rows);
  float* margin = zeros<float>(rows);
  float* ent = zeros<float>(rows);
  int32_t* st = zeros<int32_t>(rows);
  dds_sampler* s = sampler(V, rows);
  const size_t esz = bf16 ? 2 : 4;
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = rows;
  a.num_requests = rows;
  a.dtype = bf16 ? DDS_DTYPE_BF16 : DDS_DTYPE_F32;
  a.row_stride = V;
  set_filters(a, sc);
  a.tokens = tok;
  a.argmax = amax;
  a.logprobs = lp;
  a.confidence = conf;
  a.margin = margin;
  a.entropy = ent;
  a.request_status = st;
  std::vector<dds_sample_args> args(R, a);
  std::vector<dds_shard_args> shd(R);
  for (int r = 0; r < R; ++r) {
    shd[r] = shard_rank(V, r, R);
    args[r].logits = static_cast<const char*>(logits) + esz * shd[r].vocab_offset;
  }
  dds_shard_plan plan;
  plan.struct_size = sizeof plan;
  BENCH_DDS(dds_sample_shard_plan(s, &args[0], &shd[0], &plan));
  unsigned char* gathered = zeros<unsigned char>((size_t)plan.gathered_bytes);
  std::vector<unsigned char*> rec(R);
  int64_t max_rec = 8;
  for (int q = 0; q < plan.num_rounds; ++q) max_rec = plan.record_bytes[q] > max_rec ? plan.record_bytes[q] : max_rec;
  for (int r = 0; r < R; ++r) rec[r] = zeros<unsigned char>((size_t)max_rec);
  for (int q = 0; q < plan.num_rounds; ++q) {
    for (int r = 0; r < R; ++r) {
      shd[r].round = q;
      BENCH_DDS(dds_sample_partial(s, &args[r], &shd[r], gathered, rec[r], nullptr));
    }
    for (int r = 0; r < R; ++r) {
      unsigned char* dst = gathered + plan.gathered_offset[q] + r * plan.record_bytes[q];
      copy(dst, rec[r], (size_t)plan.record_bytes[q], cudaMemcpyDeviceToDevice);
    }
  }
  BENCH_DDS(dds_sample_finish(s, &args[0], &shd[0], gathered, nullptr));
  settle();
  std::vector<unsigned char> out;
  take(out, tok, rows);
  take(out, amax, rows);
  take(out, lp, rows);
  take(out, conf, rows);
  take(out, margin, rows);
  take(out, ent, rows);
  take(out, st, rows);
  dds_destroy(s);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* dump = nullptr;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else if (!std::strcmp(argv[i], "--cpu")) g_cpu = true;
    else pos.push_back(argv[i]);
  }
  auto num = [&](size_t i, int lo, int hi) {
    if (i >= pos.size()) die("missing argument (see the usage at the top of bench/profile_ops.cu)");
    const int v = std::atoi(pos[i].c_str());
    if (v < lo || v > hi) die("argument out of range");
    return v;
  };
  auto dtype = [&](size_t i) {
    if (i >= pos.size() || (pos[i] != "f32" && pos[i] != "bf16")) die("dtype must be f32 or bf16");
    return pos[i] == "bf16" ? 1 : 0;
  };
  auto word = [&](size_t i) {
    if (i >= pos.size()) die("missing scenario");
    return pos[i];
  };
  if (pos.empty()) die("usage: dds_profile_ops verify|reveal|shard ...");
  std::vector<unsigned char> out;
  if (pos[0] == "verify") out = run_verify(dtype(1), num(2, 1, 1 << 20), num(3, 1, 4096), num(4, 0, 16), word(5));
  else if (pos[0] == "reveal") out = run_reveal(num(1, 1, 1 << 20), num(2, 1, 4096), num(3, 0, 4));
  else if (pos[0] == "shard") out = run_shard(dtype(1), num(2, 2, 1 << 20), num(3, 1, 4096), num(4, 1, 8), word(5));
  else die("operation must be verify, reveal or shard");
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : out) h = (h ^ c) * 1099511628211ull;
  std::string shape;
  for (const std::string& p : pos) shape += " " + p;
  std::printf("dds_profile_ops%s%s: %zu bytes, checksum %016llx\n", shape.c_str(), g_cpu ? " (CPU)" : "",
              out.size(), (unsigned long long)h);
  if (dump) {
    FILE* f = std::fopen(dump, "wb");
    if (!f || std::fwrite(out.data(), 1, out.size(), f) != out.size()) die("cannot write the dump");
    std::fclose(f);
  }
  return 0;
}
