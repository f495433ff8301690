#!/usr/bin/env bash
# Host emulation of the CUDA dds_sample kernels (kernels/sample/) against the CPU backend: the
# kernel headers compiled for the host as they are (tests/emu/include stands for the CUDA
# headers), run by the library's own launcher under the launch plan (kernels/sample/plan.h).
# Checks the kernels' logic on a machine without a GPU (not speed, not the device libm: exp2f
# stands for ex2.approx; races: racecheck.sh).
# Usage: tests/emu/run_sample.sh <build dir with libdds.so>            the sweep below
#        tests/emu/run_sample.sh <build dir> --quick                    34 cases (CI, CTest label emu)
#        tests/emu/run_sample.sh <build dir> V rows dtype stats [tscale [mode]]   one case
#        EMU_CASES="V rows dtype stats tscale mode;..." tests/emu/run_sample.sh <build dir>   a list
#   dtype 0 f32 / 1 bf16; stats 0 processed / 1 guided; mode: "default" or a comma list of the
#   plan's overrides (SamplePlanOverrides: small_plain, small_filter, cta, bpw, fuse, direct, fbpw,
#   top2, cf_wpc, smem_row, exact_all, filter_grid, split, splitfilter, sfcols, joint, rank, spec,
#   smems, ovl), ban=N (the banned token),
#   wide=1 (rows of wide top-p nuclei), case=N (every row of case N of emu_sample.cpp's batch),
#   sfrows=N (the split fallback must take >= N rows), hostile=K
#   (64 rows as 4 requests with case K's row_offsets of tests/hostile_cases.h, positions NULL) and
#   mask=N (allowed-token masks: 1 dense, 2 sparse; emu_sample.cpp), zeros=1 (rows of +-0 whose
#   thresholds fall among the zeros: -0 and +0 tie, the lower columns kept), ties=1 (two tie
#   groups above a low floor: the split finish's selects on a small S meet ties), digit=1 (top-p
#   rows whose boundary digit holds V / 4 columns: more than the list of rows of V <= 40960);
#   "A|B": plan A against the CPU and plan B's outputs equal to A's bit for bit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
source "$here/emu_build.sh"
emu_build sample "$build"
if [ $# -gt 1 ] && [ "$2" != --quick ]; then
  "$out/emu_sample" "${@:2}"
  exit $?
fi
rc=0
# The row pass's min-p floor against the finish's threshold (random inputs, no kernel run).
[ -n "${EMU_CASES:-}" ] || "$out/emu_sample" minp_floor | tail -1 || rc=1
if [ -n "${EMU_CASES:-}" ]; then
  # EMU_CASES="V rows dtype stats tscale mode;...": those cases instead of the sweep, one build
  # (tests/emu/racecheck.sh).
  IFS=';' read -ra cases <<<"$EMU_CASES"
  for c in "${cases[@]}"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
elif [ "${2:-}" = --quick ]; then
  # One case per dispatch choice, both dtypes and statistics modes. (The batch's first 8 rows are
  # all filtered: case=14 makes every row unfiltered, for the CTA plain finish of few rows, over
  # one chunk of block records and over two.)
  for cm in "1025 40 0 1 default" "1025 40 1 1 cta=0" "1025 40 1 0 exact_all=1" "1025 40 1 0 small_plain=0,fuse=1" "5000 40 1 0 default" "5000 40 0 0 top2=0" \
            "5000 40 1 1 direct=1" "40000 22 1 0 fbpw=3" "40000 22 0 0 smem_row=0,splitfilter=0" \
            "40000 22 0 0 wide=1,sfrows=3|smem_row=1" "32000 8 0 0 digit=1|smem_row=1" \
            "1025 40 1 0 zeros=1,small_filter=0" \
            "5000 44 1 1 split=1|split=0" "1025 540 1 1 joint=1|joint=0" "1025 40 0 1 joint=1|joint=0" \
            "1025 64 0 0 hostile=0" "1025 64 1 1 hostile=1,small_plain=0,fuse=1" "5000 64 1 0 hostile=2" "40000 64 0 0 hostile=3" \
            "1025 40 0 1 mask=1" "5000 40 1 0 mask=2,small_plain=0,fuse=1" \
            "40000 22 0 0 mask=1,direct=1" "5000 44 1 1 mask=1,split=1|split=0" \
            "65536 8 0 0 wide=1,sfrows=3,splitfilter=1|wide=1,splitfilter=0" \
            "70000 8 1 1 case=14" "300000 8 0 0 case=14,mask=1" \
            "1025 600 0 0 zeros=1" "1025 8 1 0 zeros=1" "5000 40 1 0 zeros=1,mask=2" \
            "70000 8 0 0 zeros=1,split=1,splitfilter=1|zeros=1,split=0,splitfilter=0" \
            "40000 22 1 0 ties=1,split=1|ties=1,split=0" "262144 8 1 0 split=1,rank=256|split=1,rank=0" \
            "262144 8 0 0 case=12,sfrows=3,spec=1|spec=0,splitfilter=0" \
            "65536 16 1 0 wide=1,sfrows=3|wide=1,ovl=0"; do
    set -- $cm
    "$out/emu_sample" "$1" "$2" "$3" "$4" 1 "$5" 2>/dev/null | tail -1 || rc=1
  done
else
  # V: 1 block + 1 column (the list is the row), 5 blocks, 40 blocks (two warps' worth of
  # blocks); both dtypes, both statistics modes; the modes flip every dispatch choice once.
  for c in "1025 40 0 0" "1025 40 1 1" "5000 40 0 0" "5000 40 1 0" "5000 40 0 1" "40000 22 1 0"; do
    for m in default small_plain=0,fuse=1 small_plain=0,fuse=1,top2=1 top2=0,fbpw=3,smem_row=0 direct=1 direct=1,smem_row=0; do
      "$out/emu_sample" $c 1 "$m" 2>/dev/null | tail -1 || rc=1
    done
  done
  # small_plain_kernel's other shapes: one partial block, a last block of 16-byte group 0 only
  # (banned column in it), two whole blocks; exact_all=1: every column scored exactly (the rare
  # path of several candidates in one lane).
  for c in "1000 44 1 1 1 default" "1100 44 0 0 0.5 ban=1024" "2048 44 1 0 1 default" "2048 44 0 1 2 ban=2047" \
           "1025 44 1 0 1 exact_all=1" "2048 30 0 1 1 exact_all=1" "1025 44 0 1 1 cta=0" \
           "1025 44 1 0 1 cta=0,exact_all=1" "2048 30 1 1 0.5 cta=0"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
  # Filtered rows of V <= 2048 on the general path (row pass, complete lists, cand_finish) instead
  # of small_filter_kernel (which the cases above take).
  for c in "1025 40 0 0 1 small_filter=0" "1025 40 1 1 1 small_filter=0,top2=0" "2048 44 0 1 0.5 small_filter=0" "7 30 1 0 1 small_filter=0,ban=5"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
  # small_filter_kernel on tiny rows (one partial 16-byte group per lane), and its warp form
  # (the cases above take the CTA form: 40 / 44 rows).
  for c in "7 30 0 0 1 ban=5" "7 30 1 1 0.5 ban=5" "33 30 0 0 2 ban=32" "1025 40 1 1 1 cta=0" "2048 44 0 0 0.5 cta=0"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
  # The fallback rows spread over more CTAs than the default two of the emulation.
  "$out/emu_sample" 5000 40 0 0 1 filter_grid=264 2>/dev/null | tail -1 || rc=1
  # split_finish_kernel (several CTAs per row) against cand_finish_kernel, bit for bit: both
  # dtypes and statistics modes, the maximum's block re-read (top2=0), rows of 2 blocks, 149 and
  # 293 blocks (the last CTA of a row with a partial share of lists).
  for c in "5000 44 0 0 1 split=1|split=0" "5000 44 1 1 0.5 split=1,top2=0|split=0,top2=0" \
           "40000 22 1 0 1 split=1,fbpw=3|split=0" "2048 44 0 1 1 small_filter=0,split=1|small_filter=0,split=0" \
           "151936 22 1 0 1 split=1|split=0" "300000 3 0 1 1 split=1|split=0"; do
    set -- $c
    "$out/emu_sample" "$1" "$2" "$3" "$4" "$5" "$6" 2>/dev/null | tail -1 || rc=1
  done
  # The split fallback (split_filter.cuh: the wide top-p rows' histogram and boundary pass over
  # several CTAs per row, then filter_kernel) against filter_kernel alone, bit for bit: 8 rows of
  # wide nuclei (wide=1: p 0.9 / 0.95, min-p, NaN columns, a digit too wide for the list), both
  # dtypes, V of 48 + 1 and 64 blocks and 262144, flatter and sharper rows (tscale), masks, the
  # candidates' finish in either form; guided statistics (never split) and the 22 cases' batch.
  # At tscale 0.35 / 0.5 a split row's nucleus is narrow enough (830 / 1989 columns from the
  # boundary digit up) that filter_kernel alone lists all of it instead of its boundary pass.
  for c in "49153 8 0 0 1 wide=1,sfrows=3,splitfilter=1|wide=1,splitfilter=0" \
           "49153 8 0 0 0.35 wide=1,sfrows=1,splitfilter=1|wide=1,splitfilter=0" \
           "65536 8 0 0 0.5 wide=1,sfrows=3,splitfilter=1|wide=1,splitfilter=0" \
           "49153 8 1 0 0.5 wide=1,sfrows=1,splitfilter=1|wide=1,splitfilter=0" \
           "65536 8 1 0 2 wide=1,sfrows=3,splitfilter=1|wide=1,splitfilter=0" \
           "65536 8 0 0 1 wide=1,mask=1,sfrows=3,splitfilter=1|wide=1,mask=1,splitfilter=0" \
           "65536 8 1 0 1 wide=1,mask=2,sfrows=1,splitfilter=1|wide=1,mask=2,splitfilter=0" \
           "65536 8 0 0 1 wide=1,sfrows=3,split=0,splitfilter=1|wide=1,split=0,splitfilter=0" \
           "65536 8 1 1 1 wide=1,splitfilter=1|wide=1,splitfilter=0" \
           "65536 22 1 0 1 sfrows=1,splitfilter=1|splitfilter=0" \
           "262144 8 1 0 1 wide=1,sfrows=3|splitfilter=0" \
           "65536 16 1 0 1 wide=1,spec=1,sfrows=3|wide=1,spec=0" \
           "65536 16 0 0 1 wide=1,mask=2,spec=1,sfrows=3|wide=1,mask=2,splitfilter=0" \
           "151936 10 0 1 1 wide=1,spec=1|wide=1,splitfilter=0" \
           "262144 8 0 0 1 case=12,sfrows=3|ovl=0" "262144 8 1 0 0.25 default|ovl=0"; do
    set -- $c
    "$out/emu_sample" "$1" "$2" "$3" "$4" "$5" "$6" 2>/dev/null | tail -1 || rc=1
  done
  # More than 256 blocks: the CTA-per-row finish adds its block terms in chunks of 256.
  "$out/emu_sample" 300000 3 0 1 1 default 2>/dev/null | tail -1 || rc=1
  # -0 and +0 one value (zeros=1): every kernel family's selects with the thresholds among the zeros.
  for c in "1025 600 0 0 1 zeros=1" "1025 600 1 0 1 zeros=1,joint=0" "1025 40 0 0 1 zeros=1,cta=1|zeros=1,cta=0" \
           "1025 40 1 0 1 zeros=1,small_filter=0" "5000 200 0 0 1 zeros=1" "5000 40 0 0 1 zeros=1,direct=1" \
           "40000 40 1 0 1 zeros=1" "70000 16 0 0 1 zeros=1,split=1,splitfilter=1|zeros=1,split=0,splitfilter=0" \
           "300000 8 1 0 1 zeros=1,mask=1"; do
    set -- $c
    "$out/emu_sample" "$1" "$2" "$3" "$4" "$5" "$6" 2>/dev/null | tail -1 || rc=1
  done
  # Ties at the thresholds of few candidates (ties=1): the split finish's selects on a small S;
  # top-k by ranks on every S of at most 256 entries (rank=256) against the radix select (rank=0).
  for c in "40000 22 0 0 1 ties=1,split=1|ties=1,split=0" "151936 8 1 1 1 ties=1,split=1|ties=1,split=0" \
           "262144 16 0 0 1 ties=1,split=1|ties=1,split=0" "5000 40 1 0 1 ties=1" \
           "40000 22 0 0 1 ties=1,split=1,rank=256|ties=1,split=1,rank=0" \
           "262144 16 1 1 1 split=1,rank=256|split=1,rank=0"; do
    set -- $c
    "$out/emu_sample" "$1" "$2" "$3" "$4" "$5" "$6" 2>/dev/null | tail -1 || rc=1
  done
  # Allowed-token masks (dense 1, sparse 2, all-zero requests: empty rows) on every kernel family.
  for c in "1025 40 0 1 1 mask=1" "1025 40 1 0 1 mask=2" "1025 40 1 0 1 mask=1,cta=0" \
           "1025 40 1 0 1 mask=2,exact_all=1" "1025 40 1 0 1 mask=1,small_plain=0,fuse=1" \
           "1025 40 0 0 1 mask=2,small_filter=0" "5000 40 1 0 1 mask=1" "5000 40 0 0 1 mask=2,top2=0" \
           "5000 40 1 1 1 mask=1,direct=1" "40000 22 1 0 1 mask=2,fbpw=3" "40000 22 0 0 1 mask=1,smem_row=0" \
           "5000 44 1 1 1 mask=1,split=1|split=0" "1100 44 0 0 0.5 mask=2,ban=1024" "7 30 1 1 0.5 mask=1,ban=5" \
           "33 30 0 0 2 mask=2,ban=32" "151936 22 1 0 1 mask=1" "300000 3 0 1 1 mask=2,small_plain=0,fuse=0"; do
    set -- $c
    "$out/emu_sample" "$1" "$2" "$3" "$4" "$5" "$6" 2>/dev/null | tail -1 || rc=1
  done
fi
echo "run_sample.sh: $([ $rc -eq 0 ] && echo 'all cases equal to the CPU' || echo 'MISMATCHES')"
exit $rc
