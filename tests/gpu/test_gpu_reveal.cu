// dds_reveal on the CUDA backend: parity with the CPU oracle over mixed policies (ENTROPY_BOUND
// with NaN, +inf, 0 and random bounds among them), canvas writes,
// the EOS rule, graph capture and replay with new steps; large requests (3000 and 4096 rows, the
// radix-select path). dds_verify_drafts has its own test (test_gpu_verify.cu).
#include "gpu_main.h"

#include <dds/dds.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    DDS_CUDA_CHECK(cudaMalloc(&p, sizeof(T) * (n ? n : 1)));
    if (n) DDS_CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    if (n) cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost);
    return h;
  }
  void put(const std::vector<T>& h) { cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice); }
};

dds_sampler* make(int backend, int V) {
  dds_sampler_config c;
  dds_sampler_config_init(&c, sizeof c);
  c.backend = backend;
  c.vocab_size = V;
  c.max_rows = 1 << 15;
  c.max_requests = 1024;
  dds_sampler* s = nullptr;
  REQUIRE(dds_create(&c, &s) == DDS_OK);
  return s;
}

struct Case {
  int R = 0, rows = 0, L = 0;
  std::vector<int32_t> offs, pos, policies, counts, steps_left, tokens, canvas;
  std::vector<float> scores, thresholds, factors, ptemps, ebounds;
  std::vector<uint8_t> elig;
  std::vector<uint64_t> seeds;
  std::vector<uint32_t> steps;
};

Case random_case(std::mt19937& rng, int R, int max_rows, int L) {
  Case c;
  c.R = R;
  c.L = L;
  c.offs.push_back(0);
  std::uniform_int_distribution<int> nr(1, std::max(1, max_rows));
  // max_rows < 0: exactly -max_rows rows per request.
  for (int r = 0; r < R; ++r)
    c.offs.push_back(c.offs.back() + std::min(max_rows < 0 ? -max_rows : nr(rng), L));
  c.rows = c.offs.back();
  std::uniform_real_distribution<float> U(0.f, 1.f);
  for (int r = 0; r < R; ++r) {
    const int n = c.offs[r + 1] - c.offs[r];
    // Distinct positions inside the canvas, some rows outside (flagged).
    std::vector<int32_t> perm(L);
    for (int q = 0; q < L; ++q) perm[q] = q;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int j = 0; j < n; ++j) {
      c.pos.push_back(U(rng) < 0.02f ? L + 3 : perm[j]);
      // Quantised scores make ties common (ties break by position).
      c.scores.push_back(std::floor(U(rng) * 20.f) / 20.f);
      c.elig.push_back(U(rng) < 0.85f);
      c.tokens.push_back((int32_t)(U(rng) * 50));
    }
    c.policies.push_back(r % 5);  // 4: ENTROPY_BOUND (scores read as entropies)
    c.ebounds.push_back(r % 7 == 3 ? NAN : r % 7 == 5 ? INFINITY : r % 7 == 6 ? 0.f : U(rng) * 2.f);
    c.counts.push_back((int)(U(rng) * 6) - 1);  // -1, 0: use steps_left
    c.steps_left.push_back((int)(U(rng) * 5));
    c.thresholds.push_back(0.5f + 0.5f * U(rng));
    c.factors.push_back(U(rng) * 2.f);
    c.ptemps.push_back(r % 3 == 0 ? 0.5f : 0.f);
    c.seeds.push_back(rng());
    c.steps.push_back(rng() % 100);
  }
  const int MASK = 60, EOS = 61;
  c.canvas.assign((size_t)R * L, MASK);
  for (int r = 0; r < R; ++r) {
    if (r % 5 == 1) c.canvas[(size_t)r * L + L / 2] = EOS;
    for (int q = 0; q < L / 3; ++q) c.canvas[(size_t)r * L + q] = 7;
  }
  for (auto& t : c.tokens)
    if (t == 49) t = EOS;
  return c;
}

struct Out {
  std::vector<uint8_t> reveal;
  std::vector<int32_t> nrev, fin, status, canvas;
};

Out run_cpu(dds_sampler* s, const Case& c) {
  Out o;
  o.reveal.assign(c.rows, 9);
  o.nrev.assign(c.R, -5);
  o.fin.assign(c.R, -5);
  o.status.assign(c.R, -5);
  o.canvas = c.canvas;
  dds_reveal_args a;
  dds_reveal_args_init(&a, sizeof a);
  a.num_rows = c.rows;
  a.num_requests = c.R;
  a.row_offsets = c.offs.data();
  a.positions = c.pos.data();
  a.scores = c.scores.data();
  a.eligible = c.elig.data();
  a.policies = c.policies.data();
  a.counts = c.counts.data();
  a.steps_left = c.steps_left.data();
  a.thresholds = c.thresholds.data();
  a.factors = c.factors.data();
  a.position_temperatures = c.ptemps.data();
  a.entropy_bounds = c.ebounds.data();
  a.seeds = c.seeds.data();
  a.steps = c.steps.data();
  a.canvas = o.canvas.data();
  a.canvas_length = c.L;
  a.canvas_stride = c.L;
  a.tokens = c.tokens.data();
  a.mask_token = 60;
  a.eos_token = 61;
  a.reveal = o.reveal.data();
  a.num_revealed = o.nrev.data();
  a.finished = o.fin.data();
  a.request_status = o.status.data();
  REQUIRE(dds_reveal(s, &a, nullptr) == DDS_OK);
  return o;
}

}  // namespace

TEST_CASE("CUDA dds_reveal matches the CPU oracle (mixed policies, ties, canvas, EOS, graph)") {
  dds_sampler* cpu = make(DDS_BACKEND_CPU, 64);
  dds_sampler* gpu = make(DDS_BACKEND_CUDA, 64);
  std::mt19937 rng(2024);
  struct Shape {
    int R, max_rows, L;
  };
  for (Shape sh : {Shape{1, 1, 4}, Shape{3, 7, 16}, Shape{64, 256, 256}, Shape{8, 4096, 4096},
                   Shape{2, -3000, 3000}, Shape{2, -4096, 4096}, Shape{1, -20000, 20000},
                   Shape{257, 40, 64}}) {
    CAPTURE(sh.R);
    CAPTURE(sh.max_rows);
    Case c = random_case(rng, sh.R, sh.max_rows, sh.L);
    Out want = run_cpu(cpu, c);
    Dev<int32_t> offs(c.offs), pos(c.pos), policies(c.policies), counts(c.counts),
        steps_left(c.steps_left), tokens(c.tokens), canvas(c.canvas);
    Dev<float> scores(c.scores), thr(c.thresholds), fac(c.factors), pt(c.ptemps), eb(c.ebounds);
    Dev<uint8_t> elig(c.elig), reveal(std::vector<uint8_t>(c.rows, 9));
    Dev<uint64_t> seeds(c.seeds);
    Dev<uint32_t> steps(c.steps);
    Dev<int32_t> nrev(std::vector<int32_t>(c.R, -5)), fin(std::vector<int32_t>(c.R, -5)),
        status(std::vector<int32_t>(c.R, -5));
    dds_reveal_args a;
    dds_reveal_args_init(&a, sizeof a);
    a.num_rows = c.rows;
    a.num_requests = c.R;
    a.row_offsets = offs.p;
    a.positions = pos.p;
    a.scores = scores.p;
    a.eligible = elig.p;
    a.policies = policies.p;
    a.counts = counts.p;
    a.steps_left = steps_left.p;
    a.thresholds = thr.p;
    a.factors = fac.p;
    a.position_temperatures = pt.p;
    a.entropy_bounds = eb.p;
    a.seeds = seeds.p;
    a.steps = steps.p;
    a.canvas = canvas.p;
    a.canvas_length = c.L;
    a.canvas_stride = c.L;
    a.tokens = tokens.p;
    a.mask_token = 60;
    a.eos_token = 61;
    a.reveal = reveal.p;
    a.num_revealed = nrev.p;
    a.finished = fin.p;
    a.request_status = status.p;
    REQUIRE(dds_reveal(gpu, &a, nullptr) == DDS_OK);
    DDS_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(reveal.get() == want.reveal);
    CHECK(nrev.get() == want.nrev);
    CHECK(fin.get() == want.fin);
    CHECK(status.get() == want.status);
    CHECK(canvas.get() == want.canvas);

    // Graph capture, then replay with new steps written into the device array.
    cudaStream_t st;
    DDS_CUDA_CHECK(cudaStreamCreate(&st));
    canvas.put(c.canvas);
    {
      dds_status rs = DDS_OK;
      const CapturedGraph graph(st, [&] { rs = dds_reveal(gpu, &a, (dds_stream)st); });
      REQUIRE(rs == DDS_OK);
      for (auto& s : c.steps) s += 17;
      steps.put(c.steps);
      canvas.put(c.canvas);
      graph.launch();
      DDS_CUDA_CHECK(cudaStreamSynchronize(st));
      Out want2 = run_cpu(cpu, c);
      CHECK(reveal.get() == want2.reveal);
      CHECK(canvas.get() == want2.canvas);
    }
    cudaStreamDestroy(st);
  }
  dds_destroy(cpu);
  dds_destroy(gpu);
}

TEST_CASE("CUDA backend: allowed_token_masks is taken (the token is the one allowed column)") {
  dds_sampler* gpu = make(DDS_BACKEND_CUDA, 64);
  std::vector<float> logits(64, 0.f);
  logits[3] = 5.f;  // the argmax, not allowed below
  std::vector<int32_t> masks(2, 0);
  masks[1] = 1 << (41 - 32);  // column 41 only
  Dev<float> dl(logits);
  Dev<int32_t> dm(masks), tok(std::vector<int32_t>(1, -7));
  dds_sample_args a;
  dds_sample_args_init(&a, sizeof a);
  a.num_rows = 1;
  a.logits = dl.p;
  a.tokens = tok.p;
  a.allowed_token_masks = dm.p;
  REQUIRE(dds_sample(gpu, &a, nullptr) == DDS_OK);
  DDS_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(tok.get()[0] == 41);
  a.allowed_token_masks = nullptr;
  REQUIRE(dds_sample(gpu, &a, nullptr) == DDS_OK);
  DDS_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(tok.get()[0] >= 0);
  dds_destroy(gpu);
}
