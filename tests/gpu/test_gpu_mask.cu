// GPU tests of allowed-token masks in dds_sample (CUDA backend) against the CPU backend: every
// kernel family (plain pass and its finishes, small kernels, candidates, split finish, direct
// filter, probs) under forced launch plans, dense / sparse / all-zero masks, f32 / bf16 / f16.
#include "gpu_main.h"  // first: doctest implementation + main that skips without a device

#include "sample/plan.h"
#include "sample_problem.h"
#include "testing.h"

namespace {

// Allowed-token masks for every request of pb (a stride of 2 spare words): each column allowed
// with probability `density`; request r % 11 == 4 all zero (DDS_REQ_EMPTY_ROW), r % 11 == 7
// columns 0..31 only.
void add_masks(Problem& pb, uint64_t seed, float density) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  const int64_t words = (pb.V + 31) / 32;
  pb.mask_stride = words + 2;
  pb.mask.assign((size_t)pb.R * pb.mask_stride, 0);
  for (int32_t r = 0; r < pb.R; ++r) {
    int32_t* m = pb.mask.data() + (size_t)r * pb.mask_stride;
    for (int64_t w = 0; w < pb.mask_stride; ++w) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b)
        if (ud(rng) < density) bits |= 1u << b;
      m[w] = (int32_t)bits;
    }
    if (r % 11 == 4)
      for (int64_t w = 0; w < words; ++w) m[w] = 0;
    if (r % 11 == 7)
      for (int64_t w = 0; w < words; ++w) m[w] = w == 0 ? -1 : 0;
  }
}

// Masked problems: the default plan and forced plans that take every kernel family (plain pass
// and its finishes, small kernels, candidates and split finish, direct filter, probs) against the
// CPU; every token of a row that is not empty allowed by its request's mask.
void mask_parity(Problem pb, const char* what) {
  dds_sampler* cpu = make_sampler(DDS_BACKEND_CPU, pb.V, pb.rows, pb.R);
  dds_sampler* gpu = make_sampler(DDS_BACKEND_CUDA, pb.V, pb.rows, pb.R);
  const Results rc = run(cpu, pb, false);
  int empty = 0;
  for (int32_t r = 0; r < pb.R; ++r) {
    const int32_t* m = pb.mask.data() + (size_t)r * pb.mask_stride;
    if (rc.status[r] & DDS_REQ_EMPTY_ROW) ++empty;
    for (int32_t i = pb.offs[r]; i < pb.offs[r + 1]; ++i) {
      const int32_t t = rc.tokens[i];
      const bool allowed = ((uint32_t)m[t >> 5] >> (t & 31)) & 1u;
      if (!(rc.status[r] & DDS_REQ_EMPTY_ROW)) CHECK(allowed);
    }
  }
  CHECK(empty > 0);
  const char* plans[] = {"",           "small_plain=0,fuse=1", "small_plain=0,fuse=0",
                         "cta=0",      "exact_all=1",          "small_filter=0",
                         "top2=0",     "smem_row=0",           "split=1",
                         "direct=1",   "direct=1,smem_row=0"};
  const int allowed = allowed_rows(pb.rows);
  for (const char* text : plans) {
    dds::ksample::SamplePlanOverrides o;
    const char* err = nullptr;
    REQUIRE(dds::ksample::parse_plan_overrides(text, &o, &err));
    REQUIRE(dds::testing::set_sample_plan(gpu, o) == DDS_OK);
    const Results rg = run(gpu, pb, true);
    char w2[320];
    std::snprintf(w2, sizeof w2, "%s plan '%s'", what, text);
    const int bad = compare(pb, rc, rg, w2);
    MESSAGE(w2 << ": " << bad << " differing rows (allowed " << allowed << ")");
    CHECK(bad <= allowed);
  }
  dds_destroy(cpu);
  dds_destroy(gpu);
}

}  // namespace

TEST_CASE("allowed-token masks: CUDA equal to the CPU on every kernel family") {
  struct Shape {
    int32_t V, rows, dtype, stats;
    float density;
  };
  const Shape shapes[] = {{1025, 44, DDS_DTYPE_F32, DDS_STATS_GUIDED, 0.7f},
                          {1025, 44, DDS_DTYPE_BF16, DDS_STATS_PROCESSED, 0.02f},
                          {2048, 300, DDS_DTYPE_BF16, DDS_STATS_PROCESSED, 0.5f},
                          {5000, 40, DDS_DTYPE_F16, DDS_STATS_PROCESSED, 0.7f},
                          {40000, 22, DDS_DTYPE_F32, DDS_STATS_GUIDED, 0.02f},
                          {151936, 13, DDS_DTYPE_BF16, DDS_STATS_PROCESSED, 0.7f},
                          {262144, 8, DDS_DTYPE_F32, DDS_STATS_PROCESSED, 0.001f}};
  for (const Shape& sh : shapes) {
    char what[160];
    std::snprintf(what, sizeof what, "masks V=%d rows=%d dtype=%d stats=%d density=%g", sh.V,
                  sh.rows, sh.dtype, sh.stats, sh.density);
    Problem pb = make_filter_problem(sh.V, sh.rows, sh.dtype, 700 + sh.V, sh.stats, true);
    add_masks(pb, 800 + sh.V, sh.density);
    mask_parity(pb, what);
  }
  // Ragged requests, padded rows, positions, probs in bf16 (make_problem's mix).
  Problem pb = make_problem(32001, 257, DDS_DTYPE_BF16, 750, 3, true, DDS_STATS_PROCESSED, true,
                            DDS_DTYPE_BF16);
  add_masks(pb, 751, 0.7f);
  mask_parity(pb, "masks ragged V=32001 rows=257 bf16");
}
