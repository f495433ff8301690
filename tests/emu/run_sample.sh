#!/usr/bin/env bash
# Host emulation of kernels/sample.cuh (the CUDA dds_sample kernels) against the CPU backend
# (tests/emu/cuda_emu.h + cuda_emu_sample.h: a block's CUDA threads as fibers on one host thread,
# blocks one after another). Checks the kernels' logic on a machine without a GPU (not speed, not the device libm:
# exp2f stands for ex2.approx; races: racecheck.sh). filter_kernel's in-CTA candidate list
# (divergent __activemask() ballots) runs as on the GPU (cuda_emu.h, EmuConv) unless ctalist=0.
# Not part of CTest.
# Usage: tests/emu/run_sample.sh <build dir with libdds.so>            the sweep below (~1 min)
#        tests/emu/run_sample.sh <build dir> --quick                    10 cases (~15 s; CI)
#        tests/emu/run_sample.sh <build dir> V rows dtype stats [tscale [mode]]   one case
#        EMU_CASES="V rows dtype stats tscale mode;..." tests/emu/run_sample.sh <build dir>   a list
#   dtype 0 f32 / 1 bf16; stats 0 processed / 1 guided; mode: comma list of fuse=0|1, top2=0|1,
#   approx=0|1, direct=0|1, fbpw=N (blocks per warp of the filtered pass, 16-bit dtypes), srow=0
#   (filter_kernel re-reads the row from global memory, as for V > 40960), small=0|1
#   (small_plain_kernel for unfiltered rows of V <= 2048; default 1), ban=N (banned token),
#   exactall=1 (that kernel's rare path everywhere), cta=0|1 (it and small_filter_kernel with a
#   warp / a CTA per row; default: a CTA up to 264 rows, so these 40-row cases take the CTA form
#   unless cta=0),
#   sfilt=0|1 (small_filter_kernel for the filtered rows of V <= 2048; default 1), ctalist=0|1
#   (filter_kernel's in-CTA candidate list; default 1)
#   (default: src/cuda_sample.cu's rules).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
source "$here/emu_build.sh"
emu_build sample "$build"
if [ $# -gt 1 ] && [ "$2" != --quick ]; then
  "$out/emu_sample" "${@:2}"
  exit $?
fi
rc=0
if [ -n "${EMU_CASES:-}" ]; then
  # EMU_CASES="V rows dtype stats tscale mode;...": those cases instead of the sweep, one build
  # (tests/emu/racecheck.sh).
  IFS=';' read -ra cases <<<"$EMU_CASES"
  for c in "${cases[@]}"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
elif [ "${2:-}" = --quick ]; then
  # One case per dispatch choice, both dtypes and statistics modes.
  for cm in "1025 40 0 1 default" "1025 40 1 1 cta=0" "1025 40 1 0 exactall=1" "1025 40 1 0 small=0,fuse=1" "5000 40 1 0 default" "5000 40 0 0 top2=0,approx=0" \
            "5000 40 1 1 direct=1" "40000 22 1 0 fbpw=3" "40000 22 0 0 srow=0" "1025 40 0 0 sfilt=0"; do
    set -- $cm
    "$out/emu_sample" "$1" "$2" "$3" "$4" 1 "$5" 2>/dev/null | tail -1 || rc=1
  done
else
  # V: 1 block + 1 column (the list is the row), 5 blocks, 40 blocks (two warps' worth of
  # blocks); both dtypes, both statistics modes; the modes flip every dispatch choice once.
  for c in "1025 40 0 0" "1025 40 1 1" "5000 40 0 0" "5000 40 1 0" "5000 40 0 1" "40000 22 1 0"; do
    for m in default small=0,fuse=1 small=0,fuse=1,top2=1 top2=0,approx=0,fbpw=3,srow=0 direct=1 direct=1,srow=0; do
      "$out/emu_sample" $c 1 "$m" 2>/dev/null | tail -1 || rc=1
    done
  done
  # small_plain_kernel's other shapes: one partial block, a last block of 16-byte group 0 only
  # (banned column in it), two whole blocks; exactall=1: every column scored exactly (the rare
  # path of several candidates in one lane).
  for c in "1000 44 1 1 1 default" "1100 44 0 0 0.5 ban=1024" "2048 44 1 0 1 default" "2048 44 0 1 2 ban=2047" \
           "1025 44 1 0 1 exactall=1" "2048 30 0 1 1 exactall=1" "1025 44 0 1 1 cta=0" \
           "1025 44 1 0 1 cta=0,exactall=1" "2048 30 1 1 0.5 cta=0"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
  # Filtered rows of V <= 2048 on the general path (row pass, complete lists, cand_finish) instead
  # of small_filter_kernel (which the cases above take).
  for c in "1025 40 0 0 1 sfilt=0" "1025 40 1 1 1 sfilt=0,top2=0" "2048 44 0 1 0.5 sfilt=0" "7 30 1 0 1 sfilt=0,ban=5"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
  # small_filter_kernel on tiny rows (one partial 16-byte group per lane), and its warp form
  # (the cases above take the CTA form: 40 / 44 rows).
  for c in "7 30 0 0 1 ban=5" "7 30 1 1 0.5 ban=5" "33 30 0 0 2 ban=32" "1025 40 1 1 1 cta=0" "2048 44 0 0 0.5 cta=0"; do
    "$out/emu_sample" $c 2>/dev/null | tail -1 || rc=1
  done
  # filter_kernel without its in-CTA candidate list (the default runs it; ctalist=0 as the
  # emulation ran before the tenth session).
  "$out/emu_sample" 5000 40 0 0 1 ctalist=0 2>/dev/null | tail -1 || rc=1
  "$out/emu_sample" 5000 40 1 1 1 direct=1,ctalist=0 2>/dev/null | tail -1 || rc=1
  # More than 256 blocks: the CTA-per-row finish adds its block terms in chunks of 256.
  "$out/emu_sample" 300000 3 0 1 1 default 2>/dev/null | tail -1 || rc=1
fi
echo "run_sample.sh: $([ $rc -eq 0 ] && echo 'all cases equal to the CPU' || echo 'MISMATCHES')"
exit $rc
