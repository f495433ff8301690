// The CUDA dds_sample launch plan (kernels/sample/plan.h, host code): the row-count and V rules of
// the split finish and the split fallback, and the overrides the tests and the benchmark force.
// Every plan computes the same output bits (the emulation and the GPU tests compare them); these
// check which kernels a shape gets.
#include <doctest/doctest.h>

#include <string>

#include "sample/plan.h"

using namespace dds::ksample;

namespace {

SamplePlan plan_of(int V, int rows, bool top_p, const char* overrides = nullptr, bool plain = false) {
  SampleShape s;
  s.V = V;
  s.num_rows = rows;
  s.dtype = 0;
  s.run_plain = plain;
  s.run_filter = true;
  s.run_top_p = top_p;
  s.num_sms = 132;
  SamplePlanOverrides o;
  const char* err = nullptr;
  REQUIRE(parse_plan_overrides(overrides, &o, &err));
  return plan_sample(s, o);
}

}  // namespace

TEST_CASE("the split finish while rows x CTAs per row stays within 6 x SMs (32 x SMs with top-p)") {
  // V = 262144: 256 blocks, 32 CTAs a row.
  CHECK(plan_of(262144, 8, false).split_finish);
  CHECK(plan_of(262144, 8, false).split_ctas == 32);
  CHECK(plan_of(262144, 24, false).split_finish);   // 768 CTAs
  CHECK(!plan_of(262144, 32, false).split_finish);  // 1024
  CHECK(plan_of(262144, 128, true).split_finish);   // 4096 <= 4224
  CHECK(!plan_of(262144, 192, true).split_finish);
  // V = 32000: 32 blocks, 4 CTAs a row.
  CHECK(plan_of(32000, 128, false).split_finish);
  CHECK(!plan_of(32000, 256, false).split_finish);
  CHECK(plan_of(32000, 256, true).split_finish);
  // Never above kSplitMaxRows rows, forced or not; forced either way below.
  CHECK(!plan_of(32000, 4096, true).split_finish);
  CHECK(!plan_of(32000, 257, false, "split=1").split_finish);
  CHECK(plan_of(262144, 192, false, "split=1").split_finish);
  CHECK(!plan_of(262144, 8, false, "split=0").split_finish);
  // Never above kSplitMaxBlocks blocks (V > 2^20), forced or not.
  CHECK(plan_of(1048576, 1, false).split_finish);
  CHECK(!plan_of(1048577, 1, false).split_finish);
  CHECK(!plan_of(1048577, 1, false, "split=1").split_finish);
  // V <= 2048 rows take small_filter_kernel: no split.
  CHECK(!plan_of(1025, 8, true).split_finish);
  // Top-k by ranks up to the rule's |S|; forced from 0 (the radix select always) to kSplitRankMax.
  CHECK(plan_of(262144, 8, false).split_rank == split_rank_default());
  CHECK(plan_of(262144, 8, false, "rank=0").split_rank == 0);
  CHECK(plan_of(262144, 8, false, "rank=256").split_rank == kSplitRankMax);
  CHECK(plan_of(262144, 8, false, "rank=257").split_rank == split_rank_default());
  // S in shared memory up to the rule's |S|; forced from 0 (S in global memory) to kSplitSmemS.
  CHECK(plan_of(262144, 8, true).split_smem == split_smem_default());
  CHECK(split_smem_default() == kSplitSmemS);
  CHECK(plan_of(262144, 8, true, "smems=1024").split_smem == 1024);
  CHECK(plan_of(262144, 8, true, "smems=0").split_smem == 0);
  CHECK(plan_of(262144, 8, true, "smems=4096").split_smem == split_smem_default());
}

TEST_CASE("the split fallback: about 32 CTAs a row of 2048 to 8192 columns, within 16 x SMs") {
  CHECK(split_filter_cols_for(40961) == 2048);
  CHECK(split_filter_cols_for(65536) == 2048);
  CHECK(split_filter_cols_for(131072) == 4096);
  CHECK(split_filter_cols_for(151936) == 5120);
  CHECK(split_filter_cols_for(262144) == 8192);
  CHECK(split_filter_cols_for(1 << 22) == 8192);
  const SamplePlan p = plan_of(262144, 64, true);
  CHECK(p.split_filter);  // 64 x 32 = 2048 <= 2112
  CHECK(p.sf_cols == 8192);
  CHECK(p.sf_ctas == 32);
  CHECK(!plan_of(262144, 128, true).split_filter);
  CHECK(plan_of(65536, 8, true).sf_ctas == 32);
  CHECK(plan_of(151936, 8, true).sf_ctas == 30);
  // Only for calls that can have top-p rows, and only for rows of more than kSplitFiltMinV
  // columns; a call it takes re-reads its rows (no row in shared memory), smem_row=1 forces the
  // row into shared memory and the split out (up to kSmemRowMax columns; above, no row is held).
  CHECK(!plan_of(262144, 8, false).split_filter);
  CHECK(!plan_of(kSplitFiltMinV, 8, true).split_filter);
  CHECK(plan_of(kSplitFiltMinV, 8, true).smem_row);
  CHECK(plan_of(kSplitFiltMinV + 1, 8, true).split_filter);
  CHECK(plan_of(32000, 8, true).split_filter);
  CHECK(!plan_of(32000, 8, true).smem_row);
  CHECK(plan_of(32000, 8, true).sf_ctas == 16);
  CHECK(plan_of(32000, 8, false).smem_row);       // no top-p: no split, the row in shared memory
  // (rows filter_kernel would hold in shared memory: within 4 x SMs CTAs)
  CHECK(plan_of(32000, 33, true).split_filter);   // 33 x 16 = 528
  CHECK(!plan_of(32000, 34, true).split_filter);
  CHECK(plan_of(32000, 34, true).smem_row);
  CHECK(plan_of(40000, 22, true).split_filter);   // 22 x 20 = 440
  CHECK(plan_of(40961, 100, true).split_filter);  // above: 100 x 21 = 2100 <= 16 x SMs
  CHECK(!plan_of(40961, 101, true).split_filter);
  CHECK(!plan_of(32000, 8, true, "smem_row=1").split_filter);
  CHECK(plan_of(32000, 8, true, "smem_row=1").smem_row);
  CHECK(!plan_of(262144, 8, true, "smem_row=1").smem_row);
  CHECK(plan_of(262144, 8, true, "smem_row=1").split_filter);
  CHECK(plan_of(40961, 8, true).split_filter);
  // Forced columns per CTA: a multiple of 1024 from 1024 to 65536, else the rule.
  CHECK(plan_of(262144, 8, true, "sfcols=4096").sf_cols == 4096);
  CHECK(plan_of(262144, 8, true, "sfcols=4096").sf_ctas == 64);
  CHECK(plan_of(262144, 8, true, "sfcols=1000").sf_cols == 8192);
  CHECK(plan_of(262144, 8, true, "sfcols=131072").sf_cols == 8192);
  CHECK(plan_of(262144, 128, true, "splitfilter=1").split_filter);
}

TEST_CASE("the split fallback's histograms beside the split finish while both grids fit 8 x SMs") {
  const SamplePlan p = plan_of(262144, 16, true);  // 16 x (32 + 32) = 1024 <= 1056
  CHECK(p.split_finish);
  CHECK(p.split_filter);
  CHECK(p.split_spec);
  CHECK(plan_of(262144, 8, true).split_spec);
  CHECK(!plan_of(262144, 17, true).split_spec);    // 1088
  CHECK(plan_of(151936, 21, true).split_spec);     // 21 x (19 + 30) = 1029
  CHECK(!plan_of(151936, 22, true).split_spec);    // 1078
  CHECK(plan_of(65536, 26, true).split_spec);      // 26 x (8 + 32) = 1040
  CHECK(!plan_of(65536, 32, true).split_spec);     // 1280
  CHECK(plan_of(65536, 32, true, "spec=1").split_spec);
  CHECK(!plan_of(262144, 8, true, "spec=0").split_spec);
  // Never without both: no top-p rows, no split finish or no split fallback.
  CHECK(!plan_of(262144, 8, false).split_spec);
  CHECK(!plan_of(262144, 8, true, "split=0,spec=1").split_spec);
  CHECK(!plan_of(262144, 8, true, "splitfilter=0,spec=1").split_spec);
  // The boundary pass and filter_kernel overlap the finish's tail with the histograms beside it,
  // never without them.
  CHECK(p.split_overlap);
  CHECK(!plan_of(262144, 8, true, "ovl=0").split_overlap);
  CHECK(!plan_of(262144, 17, true).split_overlap);
  CHECK(!plan_of(262144, 8, true, "spec=0,ovl=1").split_overlap);
  CHECK(!plan_of(262144, 8, false, "ovl=1").split_overlap);
}

TEST_CASE("V <= 2048: small_filter_kernel also runs a mixed call's unfiltered rows") {
  // Both kinds of rows: one launch, in either form of the kernel.
  CHECK(plan_of(1025, 4096, true, nullptr, true).small_joint);
  CHECK(plan_of(2048, 529, false, nullptr, true).small_joint);
  CHECK(plan_of(1025, 8, true, nullptr, true).small_joint);
  CHECK(plan_of(1025, 8, true, "cta=0", true).small_joint);
  // One kind of row only, V > 2048 or the general path for either kind: no joint launch.
  CHECK(!plan_of(1025, 4096, true).small_joint);
  CHECK(!plan_of(2049, 4096, true, nullptr, true).small_joint);
  CHECK(!plan_of(1025, 4096, true, "joint=0", true).small_joint);
  CHECK(!plan_of(1025, 4096, true, "small_plain=0", true).small_joint);
  CHECK(!plan_of(1025, 8, true, "small_filter=0", true).small_joint);
}

TEST_CASE("plan overrides: the parser names the item it cannot read") {
  SamplePlanOverrides o;
  const char* err = nullptr;
  CHECK(parse_plan_overrides("split=0,sfcols=2048", &o, &err));
  CHECK(o.split == 0);
  CHECK(o.sfcols == 2048);
  CHECK(o.splitfilter == -1);
  CHECK(parse_plan_overrides("default", &o, &err));
  CHECK(o.sfcols == -1);
  CHECK(!parse_plan_overrides("split=1,sf_cols=2048", &o, &err));
  REQUIRE(err != nullptr);
  CHECK(std::string(err) == "sf_cols=2048");
}
