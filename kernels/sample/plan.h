// The launch plan of a dds_sample call: which kernels run and in which shape, as a pure function
// of the call's shape and the device (plan_sample). The launcher (launch.cuh), the host emulation
// (tests/emu) and the tests all take their decisions from here; nothing else decides. No output
// depends on the plan (every kernel shape computes the same bits; the tests compare them), only
// the time does. Host code only, no CUDA headers.
#ifndef DDS_KERNELS_SAMPLE_PLAN_H_
#define DDS_KERNELS_SAMPLE_PLAN_H_

#include <cstdlib>
#include <cstring>

#include "../common/rng.h"  // kBlockSize

namespace dds {
namespace ksample {

constexpr int kB = kBlockSize;  // 1024
constexpr int kRowWarps = 8;    // warps per CTA of the row kernels
constexpr int kFilterThreads = 1024;
constexpr int kSmemRowMax = 40960;  // filter_kernel holds rows up to this many columns in smem
constexpr int kFilteredBpwMax = 4;  // row_pass_kernel, 16-bit logits: blocks per warp, at most
constexpr int kDefaultSms = 132;    // the H200's SM count: used when the device's is unknown
constexpr int kSplitBlocks = 8;     // split_finish_kernel: blocks (lists) per CTA, a warp each
constexpr int kSplitMaxRows = 256;  // split_finish_kernel: rows at most (its S buffers' capacity)
                                    // (and the split fallback's: its lists' capacity)
constexpr int kSplitMaxBlocks = 1024;  // split_finish_kernel: blocks a row at most (V <= 2^20: its
                                       // kept masses per block in shared memory)
constexpr int kSplitSmemS = 2048;      // split_finish_kernel: S entries held in shared memory, at
                                       // most (in the records' place; plan.split_smem is the limit)
constexpr int kSplitRankMax = 256;     // split_finish_kernel: top-k by ranks, |S| at most (a
                                       // thread per entry; the plan's split_rank is the limit)
constexpr int kSplitFiltCols = 8192;  // split fallback (split_filter.cuh): columns per CTA, at most

// What the plan depends on: the call's host-visible shape and the device.
struct SampleShape {
  int V = 0;
  int num_rows = 0;
  int dtype = 0;           // 0 f32, 1 bf16, 2 f16
  bool run_plain = true;   // unfiltered rows may occur (from the host-visible scalars)
  bool run_filter = false; // filtered rows may occur
  bool run_top_p = false;  // rows with a top-p in (0, 1) may occur (the split fallback's rows)
  int num_sms = kDefaultSms;
};

struct SamplePlan {
  int nblocks = 0;
  // Unfiltered rows.
  bool small_plain = false;  // V <= 2048: small_plain_kernel (pass and finish in one launch)
  bool small_cta = false;    //   with a CTA per row (else a warp per row)
  int bpw = 1;               // plain_pass_kernel: consecutive blocks of a row per warp
  bool fuse_finish = false;  // the row's last pass warp finishes it (no finish kernel)
  bool finish_warp = false;  // separate finish: plain_finish_warp_kernel (else a CTA per row)
  bool zero_counters = false;  // fused finish with several warps per row: counters zeroed first
  // Filtered rows.
  bool small_filter = false;      // V <= 2048: small_filter_kernel (no lists, no fallback)
  bool small_filter_cta = false;  //   with a CTA per row
  bool small_joint = false;       //   it also runs the unfiltered rows, in its form (no
                                  //   small_plain_kernel launch)
  bool direct_filter = false;     // every filtered row to filter_kernel (no candidate lists)
  int fbpw = 1;                   // row_pass_kernel: consecutive blocks per warp (16-bit dtypes)
  bool pass_top2 = false;         // row_pass_kernel records each block's argmax and runner-up
  int cf_wpc = kRowWarps;         // cand_finish_kernel: warps (rows) per CTA
  bool smem_row = false;          // filter_kernel holds the row in shared memory
  int filter_grid = 0;            // filter_kernel CTAs (fallback rows: a grid-stride loop)
  bool zero_fallback = false;     // the fallback list's counters zeroed first
  bool split_finish = false;      // split_finish_kernel (several CTAs per row) for cand_finish
  int split_ctas = 1;             //   its CTAs per row (from V only)
  bool split_filter = false;      // wide top-p rows left to filter_kernel: histogram and boundary
                                  // pass over several CTAs per row first (split_filter.cuh)
  int sf_cols = kSplitFiltCols;   //   columns per CTA (a multiple of 1024)
  int sf_ctas = 1;                //   their CTAs per row (from V only)
  bool split_spec = false;        //   its histograms beside the split finish, for every row it
                                  //   may take (split_finish_hist_kernel; no split_hist_kernel)
  bool split_overlap = false;     //   and its boundary pass and filter_kernel launched to start
                                  //   while the finish's settled rows still run (split_spec only)
  int split_smem = 0;             // split_finish_kernel: S in shared memory when |S| <= this
  int split_rank = 0;             // split_finish_kernel: top-k by ranks when |S| is at most this
                                  // (0: always the radix select)
  // Tests only: small_plain_kernel scores every column of the winning block exactly.
  bool small_exact_all = false;
  // Derived launch shapes.
  bool run_plain = false, run_filter = false;
};

// Non-default choices for tests, the emulation and the benchmark's A/B runs (never set by the
// library itself): -1 keeps the rule, another value forces the choice (0/1 for the flags).
struct SamplePlanOverrides {
  int small_plain = -1, small_filter = -1, cta = -1, bpw = -1, fuse = -1, direct = -1,
      fbpw = -1, top2 = -1, cf_wpc = -1, smem_row = -1, exact_all = -1, filter_grid = -1,
      split = -1, splitfilter = -1, sfcols = -1, joint = -1, rank = -1, spec = -1, smems = -1,
      ovl = -1;
};

// Consecutive blocks per warp of plain_pass_kernel: 16 from 1024 rows, 8 below (256 x 262144 f32
// plain 93.5 -> 106.2 us with 16, 512 x 32000 bf16 42.8 -> 48.2 us), fewer while that would leave
// fewer than 2048 warps.
inline int plain_bpw(int num_rows, int nblocks) {
  int bpw = num_rows < 1024 ? 8 : 16;
  while (bpw > 1 && (long long)num_rows * ((nblocks + bpw - 1) / bpw) < 2048) bpw >>= 1;
  return bpw;
}
// Consecutive blocks per warp of row_pass_kernel: f32 takes one (several measured slower: 4096 x
// 262144 top-k 1231 -> 1348 us); 16-bit logits up to kFilteredBpwMax (4096 x 262144 bf16 top-k
// 1134 -> 960 us, min-p 1276 -> 1107), fewer while that would leave fewer than 2048 warps, one for
// rows of <= 2 blocks (their lists hold every column: 4096 x 1025 bf16 min-p 143 us with one, 163
// with two).
inline int filtered_bpw(int dtype, int num_rows, int nblocks) {
  if (dtype == 0 || nblocks <= 2) return 1;
  int bpw = kFilteredBpwMax;
  while (bpw > 1 && (long long)num_rows * ((nblocks + bpw - 1) / bpw) < 2048) bpw >>= 1;
  return bpw;
}
// From 1024 rows, rows that one warp streams whole are finished by that warp inside the pass (a
// warp per row finishes them anyway); fewer rows keep the separate finish.
inline bool plain_fuse_default(int num_rows, int nblocks) {
  const int bpw = plain_bpw(num_rows, nblocks);
  return num_rows >= 1024 && (nblocks + bpw - 1) / bpw == 1;
}
// Small grids (<= 4096 row blocks) are latency-bound: the filtered pass then also records each
// block's first argmax and runner-up, sparing the finish a dependent re-read (256 x 1025 top-k
// 51.6 -> 57.8 us without it); large grids are ALU-bound and skip that work (4096 x 262144 bf16
// top-k 50 1631 -> 1247 us without it). Exact either way (max / min only).
inline bool pass_top2_default(int num_rows, int nblocks) {
  return (long long)num_rows * nblocks <= 4096;
}
// cand_finish_kernel: a warp per row, kRowWarps rows per CTA, fewer while that would leave SMs
// without a row (each row's finish is a latency chain; the warps of a CTA share one SM).
inline int cand_finish_wpc(int num_rows, int num_sms) {
  int wpc = kRowWarps;
  while (wpc > 1 && (long long)((num_rows + wpc - 1) / wpc) < num_sms) wpc >>= 1;
  return wpc;
}
// small_plain_kernel: a CTA per row (its warps share the token pass) while the rows fit two CTAs
// per SM; a warp per row beyond.
inline bool small_cta_default(int num_rows, int num_sms) { return num_rows <= 2 * num_sms; }
// small_filter_kernel: a CTA per row up to 4 x SMs rows (f32 1025 columns, warp -> CTA per row:
// 256 rows top-p 59.1 -> 30.2 us, top-k 33.3 -> 23.4; 528 rows top-p 58.3 -> 50.0, top-k 33.0 ->
// 38.1; 1024 rows top-p 61.2 -> 87.3).
inline bool small_filter_cta_default(int num_rows, int num_sms) { return num_rows <= 4 * num_sms; }
// The candidates' finish split over CTAs (split_finish_kernel, kSplitBlocks block lists per CTA,
// split_ctas_for(blocks) CTAs per row) while its grid stays small: rows x CTAs per row at most
// 6 x SMs, or 32 x SMs when the call can have top-p rows (whose finish, float64 masses over the
// candidates, gains the most from the split; a call with a top-p array but top-k rows then takes
// the split where it costs time, e.g. 64 x 262144 top-k below). The outputs are those of
// cand_finish_kernel bit for bit (split_row.cuh), so the choice may follow the row count; the
// split itself depends on V only.
// H100, dds_profile_sample (200 stream-launched calls, median; split / cand_finish, us):
//   top-k 50 f32 32000 (4 CTAs a row): 32 rows 100.3 / 119.3, 128 rows 113.7 / 129.4, 256 rows
//   164.1 / 153.8; f32 262144 (32 CTAs a row): 32 rows 95.4 / 93.2, 64 rows 161.4 / 112.3, 192
//   rows 406.0 / 163.6; min-p 0.05 f32 151936 (19 CTAs a row): 32 rows 55.2 / 82.5, 64 rows 84.7 /
//   96.2, 96 rows 187.1 / 179.0; top-p 0.9 bf16 262144 T = 0.25: 64 rows 156.7 / 257.6, 128 rows
//   262.2 / 298.1, 256 rows 474.3 / 356.1.
// H200, dds_bench at 8 rows (whole-library A/B): f32 262144 top-k 50 82.8 -> 50.0 us, min-p 0.05
// 104.7 -> 42.4, peaked top-p 188.6 -> 61.6; f32 32000 top-k 50 59.7 -> 38.9. H100, top-p 0.9 at
// 256 rows of 32000 (4 CTAs a row: inside the top-p bound), dds_profile_sample (20 calls, median
// us), split / cand_finish (split=0): f32 T = 0.5 147.7 / 173.4, bf16 T = 0.5 155.7 / 190.4, f32
// T = 1 (flat) 211.0 / 208.6; 64 rows f32 T = 0.5 96.1 / 144.6.
constexpr int split_ctas_for(int nblocks) { return (nblocks + kSplitBlocks - 1) / kSplitBlocks; }
inline bool split_finish_default(int num_rows, int nblocks, bool top_p, int num_sms) {
  return (long long)num_rows * split_ctas_for(nblocks) <= (long long)(top_p ? 32 : 6) * num_sms;
}
// split_finish_kernel's top-k threshold by ranks (rank_topk) when S is in shared memory and holds
// at most this many entries (a thread per entry, each counting the entries above it); the radix
// select's passes above. H100, dds_profile_sample (30 calls, median us), rank=128 / this, top-k
// 50: f32 262144 x 8 43.4 / 38.1, bf16 262144 x 8 42.1 / 37.7, x 24 58.1 / 51.5, bf16 151936 x 8
// 38.0 / 36.3 (sigma-2 rows of 262144 columns have S of 56-173 entries); at 32000 columns, where
// it ranks a few more rows, from 10% faster to 3.5% slower (docs/cuda_sample.md §5).
constexpr int split_rank_default() { return kSplitRankMax; }
// split_finish_kernel's last CTA copies S to shared memory when it holds at most this many
// entries (the selects' passes, the sums and the token then read it there), in the place of the
// block records' fields. H100, dds_profile_sample (30 calls, median us), smems=1024 / 2048, top-p
// 0.9 at 8 rows: f32 262144 T = 0.5 103.7 / 99.2, f32 151936 93.2 / 90.2, bf16 151936 111.4 /
// 106.3, bf16 262144 T = 0.25 60.9 / 58.5, T = 0.5 119.2 / 121.3; bf16 262144 x 64 237.7 / 230.8
// (sigma-4-like rows of 262144 columns that settle have S of 420-1869 entries).
constexpr int split_smem_default() { return kSplitSmemS; }
// The split fallback (split_hist_kernel, split_bound_kernel) for the fallback rows of V >
// kSmemRowMax: about 32 CTAs per row, 2048 to 8192 columns each (H100, 8 rows of flat top-p 0.9,
// us for 2048 / 4096 / 8192 columns: f32 65536 94.9 / 98.6 / 108.4, bf16 65536 119.6 / 119.0 /
// 129.6, f32 131072 109.4 / 110.7 / 118.4, f32 262144 145.1 / 137.2 / 137.6, bf16 262144 179.4 /
// 170.8 / 168.5), while rows x CTAs per row is at most 16 x SMs (bf16 262144 flat top-p, split
// / filter_kernel alone: 32 rows 262.4 / 383.3 us, 64 rows 376.6 / 443.5, 128 rows 598.0 / 543.0,
// 256 rows 1128.9 / 1069.3). filter_kernel's outputs are the same bits with or without it
// (split_filter.cuh), so the choice may follow the row count; the split depends on V only.
// Rows of kSplitFiltMinV < V <= kSmemRowMax, which filter_kernel alone holds in shared memory (a
// call the split takes re-reads them), while rows x CTAs per row is at most 4 x SMs (H100,
// dds_profile_sample --graph, 100 launches, the row in shared memory (smem_row=1) / the split, top-p
// 0.9, us; the same output bytes): 8 rows f32 32000 T = 1 83.8 / 57.4, T = 0.5 88.4 / 55.8, bf16
// 32000 T = 1 95.3 / 67.0, T = 0.5 105.5 / 63.6, f32 20000 69.7 / 57.6, f32 16400 68.5 / 57.6,
// the mix f32 32000 104.6 / 71.4; bf16 40000 x 22 T = 0.5 115.7 / 74.1; but f32 32000 x 64 T = 1
// 87.8 / 92.3 (bf16 32000 x 128 T = 0.5 118.3 / 110.9). Beyond the bounds, H100,
// dds_profile_sample (20 stream-launched calls, median us), the default / splitfilter=1, top-p
// 0.9, the same bytes: flat rows (T = 1) lose, f32 32000 x 64 94.7 / 101.3, x 256 209.5 / 251.9,
// bf16 32000 x 256 222.1 / 259.9; sigma-4-like rows (T = 0.5) gain up to 128 rows, f32 32000 x 64
// 96.9 / 91.4, x 128 113.4 / 106.7, bf16 x 128 126.6 / 118.8, f32 151936 x 128 270.3 / 234.6, and
// lose or gain little at 256, f32 32000 151.8 / 160.1, bf16 32000 156.3 / 162.6, f32 151936 377.6
// / 389.0, bf16 262144 618.0 / 594.2. The plan cannot tell flat rows from peaked ones, so the
// bounds keep the flat rows' side.
constexpr int kSplitFiltMinV = 16384;  // the split fallback takes rows of more columns than this
constexpr int split_filter_cols_for(int V) {
  const int c = ((V + 31) / 32 + kB - 1) / kB * kB;
  return c < 2048 ? 2048 : c > kSplitFiltCols ? kSplitFiltCols : c;
}
constexpr int split_filter_ctas_for(int V, int cols) { return (V + cols - 1) / cols; }
inline bool split_filter_default(int V, int num_rows, int sf_ctas, int num_sms) {
  return (long long)num_rows * sf_ctas <= (V <= kSmemRowMax ? 4LL : 16LL) * num_sms;
}
// The split fallback's histograms beside the split finish, in its launch
// (split_finish_hist_kernel), for every row the fallback may take, while both grids together are
// at most 8 x SMs CTAs: the histograms need only the logits and the block records, and take the
// SMs that idle while each row's last finish CTA works; rows that settle pay a read for nothing.
// The outputs are the same bits either way. H100, dds_profile_sample (30 calls, median us),
// spec=0 / spec=1, top-p 0.9: f32 262144 T = 0.5 (64 CTAs a row): 8 rows 119.7 / 101.2, 16 rows
// 135.6 / 116.7, 32 rows 175.4 / 166.3, 64 rows 228.9 / 261.9; bf16 262144 T = 0.25 (peaked): 8
// rows 60.2 / 57.5, 16 rows 76.6 / 74.1, 32 rows 91.3 / 105.2; f32 151936 T = 0.5 (49): 16 rows
// 113.7 / 101.9; bf16 65536 T = 0.5 (40): 16 rows 107.5 / 94.1; another run, f32 262144 T = 0.5:
// 12 rows 128.6 / 113.3, 24 rows 165.8 / 166.3, T = 0.25 at 24 rows 80.1 / 82.5
// (docs/cuda_sample.md §2).
inline bool split_spec_default(int num_rows, int split_ctas, int sf_ctas, int num_sms) {
  return (long long)num_rows * (split_ctas + sf_ctas) <= 8LL * num_sms;
}
// With the histograms beside the finish, the boundary pass and filter_kernel start while the
// finish's settled rows still run (programmatic dependent launch; the grids hand over through
// counters, docs/cuda_sample.md §5): the fallback rows' chain no longer waits for the slowest
// settled row. The outputs are the same bits either way. H100, CUDA-graph replays of one build,
// dds_profile_sample --graph medians of 200 launches, ovl=0 / the default, top-p 0.9, us: f32
// 262144 x 8 T = 0.5 93.5 / 84.7, bf16 262144 x 8 T = 0.5 108.3 / 92.7, bf16 151936 x 16 108.8 /
// 102.9; (30 launches) f32 151936 x 8 83.3 / 68.8, bf16 65536 x 16 86.0 / 75.6, bf16 262144 x 8 T =
// 0.25 50.8 / 49.4. Where every row falls back (flat rows) there is nothing to overlap and the
// launch attribute costs ~2 us: f32 262144 x 8 T = 1 101.8 / 103.9, x 12 114.0 / 115.7; f32 262144
// x 16 T = 0.5 109.1 / 111.3. A settled row signals at its top-p select's first pass rather than
// after its thresholds (after / at, 30 launches, T = 0.5, 8 rows): f32 262144 85.3 / 84.5, bf16
// 262144 100.7 / 92.9, f32 151936 75.7 / 69.0.
inline bool split_overlap_default() { return true; }

// Parses "key=value,..." into o (keys: the fields of SamplePlanOverrides; "default": none), for
// the tests' and tools' command lines. Returns false with *err at the bad item.
inline bool parse_plan_overrides(const char* text, SamplePlanOverrides* o, const char** err) {
  struct Key {
    const char* name;
    int SamplePlanOverrides::*field;
  };
  static const Key keys[] = {
      {"small_plain", &SamplePlanOverrides::small_plain}, {"small_filter", &SamplePlanOverrides::small_filter},
      {"cta", &SamplePlanOverrides::cta},                 {"bpw", &SamplePlanOverrides::bpw},
      {"fuse", &SamplePlanOverrides::fuse},               {"direct", &SamplePlanOverrides::direct},
      {"fbpw", &SamplePlanOverrides::fbpw},               {"top2", &SamplePlanOverrides::top2},
      {"cf_wpc", &SamplePlanOverrides::cf_wpc},           {"smem_row", &SamplePlanOverrides::smem_row},
      {"exact_all", &SamplePlanOverrides::exact_all},     {"filter_grid", &SamplePlanOverrides::filter_grid},
      {"split", &SamplePlanOverrides::split},             {"splitfilter", &SamplePlanOverrides::splitfilter},
      {"sfcols", &SamplePlanOverrides::sfcols},           {"joint", &SamplePlanOverrides::joint},
      {"rank", &SamplePlanOverrides::rank},               {"spec", &SamplePlanOverrides::spec},
      {"smems", &SamplePlanOverrides::smems},             {"ovl", &SamplePlanOverrides::ovl},
  };
  *o = SamplePlanOverrides{};
  for (const char* p = text; p && *p;) {
    const char* end = std::strchr(p, ',');
    const size_t n = end ? (size_t)(end - p) : std::strlen(p);
    if (!(n == 7 && std::strncmp(p, "default", 7) == 0)) {
      const char* eq = static_cast<const char*>(std::memchr(p, '=', n));
      const Key* k = nullptr;
      for (const Key& c : keys)
        if (eq && std::strlen(c.name) == (size_t)(eq - p) && std::strncmp(p, c.name, eq - p) == 0) k = &c;
      if (!k) {
        if (err) *err = p;
        return false;
      }
      o->*(k->field) = std::atoi(eq + 1);
    }
    p = end ? end + 1 : nullptr;
  }
  return true;
}

inline SamplePlan plan_sample(const SampleShape& s, const SamplePlanOverrides& o = {}) {
  auto pick = [](int forced, bool rule) { return forced >= 0 ? forced != 0 : rule; };
  const int sms = s.num_sms > 0 ? s.num_sms : kDefaultSms;
  SamplePlan p;
  p.nblocks = (s.V + kB - 1) / kB;
  p.run_plain = s.run_plain;
  p.run_filter = s.run_filter;
  const bool small = p.nblocks <= 2;
  // Unfiltered rows.
  p.small_plain = pick(o.small_plain, true) && small;
  p.small_cta = pick(o.cta, small_cta_default(s.num_rows, sms));
  p.small_exact_all = pick(o.exact_all, false);
  p.bpw = o.bpw > 0 ? o.bpw : plain_bpw(s.num_rows, p.nblocks);
  p.fuse_finish = s.run_plain && !p.small_plain && pick(o.fuse, plain_fuse_default(s.num_rows, p.nblocks));
  p.finish_warp = s.num_rows >= 1024;
  p.zero_counters = p.fuse_finish && (p.nblocks + p.bpw - 1) / p.bpw > 1;
  // Filtered rows. The direct form (every filtered row to filter_kernel) is faster on some small
  // problems but sums a row's statistics in another order than the lists' finish, so choosing it
  // by the row count would make a request's logprob / entropy depend on the batch it rides in:
  // it is a test choice only.
  p.direct_filter = pick(o.direct, false);
  p.small_filter = pick(o.small_filter, true) && small && !p.direct_filter;
  p.small_filter_cta = pick(o.cta, small_filter_cta_default(s.num_rows, sms));
  p.small_joint = s.run_plain && s.run_filter && p.small_plain && p.small_filter && pick(o.joint, true);
  p.fbpw = o.fbpw > 0 && s.dtype != 0 ? o.fbpw : filtered_bpw(s.dtype, s.num_rows, p.nblocks);
  p.pass_top2 = pick(o.top2, pass_top2_default(s.num_rows, p.nblocks));
  p.cf_wpc = o.cf_wpc > 0 && o.cf_wpc <= kRowWarps ? o.cf_wpc : cand_finish_wpc(s.num_rows, sms);
  p.filter_grid = s.num_rows;
  if (!p.direct_filter && p.filter_grid > 2 * sms) p.filter_grid = 2 * sms;
  if (o.filter_grid > 0 && !p.direct_filter) p.filter_grid = o.filter_grid;
  p.zero_fallback = s.run_filter && !p.direct_filter && !p.small_filter;
  // (never beyond kSplitMaxRows rows or kSplitMaxBlocks blocks, forced or not: the workspace holds
  // S for that many rows, and the kernel's shared memory the block masses of that many blocks)
  p.split_finish = s.run_filter && !p.direct_filter && !p.small_filter && s.num_rows <= kSplitMaxRows &&
                   p.nblocks <= kSplitMaxBlocks &&
                   pick(o.split, split_finish_default(s.num_rows, p.nblocks, s.run_top_p, sms));
  p.split_ctas = split_ctas_for(p.nblocks);
  // (forced: 0 to kSplitRankMax)
  p.split_rank = o.rank >= 0 && o.rank <= kSplitRankMax ? o.rank : split_rank_default();
  // (forced: 0 to kSplitSmemS)
  p.split_smem = o.smems >= 0 && o.smems <= kSplitSmemS ? o.smems : split_smem_default();
  // (columns per CTA forced: a multiple of 1024, from 1024 to 65536; else the rule)
  p.sf_cols = o.sfcols >= kB && o.sfcols <= 65536 && o.sfcols % kB == 0 ? o.sfcols : split_filter_cols_for(s.V);
  p.sf_ctas = split_filter_ctas_for(s.V, p.sf_cols);
  // (rows of more than kSplitFiltMinV columns that filter_kernel re-reads: a call the split takes
  // does not hold its rows in shared memory, and a forced smem_row=1 leaves the split out; at most
  // kSplitMaxRows rows, forced or not: the workspace holds their lists for that many)
  const bool smem_forced = o.smem_row == 1 && s.V <= kSmemRowMax;
  p.split_filter = s.run_filter && s.run_top_p && !p.direct_filter && !p.small_filter && !smem_forced &&
                   s.V > kSplitFiltMinV && s.num_rows <= kSplitMaxRows &&
                   pick(o.splitfilter, split_filter_default(s.V, s.num_rows, p.sf_ctas, sms));
  // (never above kSmemRowMax columns, forced or not: the shared memory holds that many)
  p.smem_row = s.V <= kSmemRowMax && pick(o.smem_row, !p.split_filter);
  p.split_spec = p.split_finish && p.split_filter &&
                 pick(o.spec, split_spec_default(s.num_rows, p.split_ctas, p.sf_ctas, sms));
  p.split_overlap = p.split_spec && pick(o.ovl, split_overlap_default());
  return p;
}

}  // namespace ksample
}  // namespace dds

#endif  // DDS_KERNELS_SAMPLE_PLAN_H_
