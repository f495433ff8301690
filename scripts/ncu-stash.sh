#!/usr/bin/env bash
# On the GPU machine, from the repo root: median call times and per-kernel ncu figures of
# dds_stash_logprobs (dds_profile_stash) for a few shapes, from .gpu-artifacts/build.
# SHAPES="dtype V rows keep_every n;..." overrides the list; NCU=0 prints the times only.
# Writes $OUT/ncu_stash_<shape>.txt (SpeedOfLight, Occupancy, WarpStateStats, SourceCounters).
set -u
B=${B:-$PWD/.gpu-artifacts/build}
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
IFS=';' read -ra shapes <<<"${SHAPES:-bf16 32000 256 16 5;bf16 32000 256 16 20;bf16 32000 4096 1 20;f32 262144 256 16 20}"
for s in "${shapes[@]}"; do
  echo "### $s: $("$B/dds_profile_stash" $s 30 | tail -1)"
  [ "${NCU:-1}" = 1 ] || continue
  f="$OUT/ncu_stash_$(echo $s | tr ' ' _).txt"
  ncu --clock-control none --kernel-name regex:stash_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section SourceCounters "$B/dds_profile_stash" $s 3 >"$f" 2>&1
  grep -E 'Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|Grid Size|Block Size|Issued Warp|No Eligible' "$f"
done
