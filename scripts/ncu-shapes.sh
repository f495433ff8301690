#!/usr/bin/env bash
# On the GPU machine, from the repo root: per-kernel ncu figures (duration, DRAM / SM throughput,
# occupancy, registers, stall) of dds_sample for a few shapes, from .gpu-artifacts/build
# (scripts/prep-gpu-final.sh). SHAPES="dtype V rows scenario;..." overrides the list.
# Writes $OUT/ncu_<shape>.txt and prints the median call times and a digest.
set -u
B=${B:-$PWD/.gpu-artifacts/build}
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
IFS=';' read -ra shapes <<<"${SHAPES:-f32 1025 4096 plain;bf16 1025 4096 plain;bf16 262144 4096 plain;f32 1025 4096 topk}"
for s in "${shapes[@]}"; do
  f="$OUT/ncu_$(echo $s | tr ' ' _).txt"
  echo "### $s: $("$B/dds_profile_sample" $s 20 | tail -1)"
  ncu --clock-control none --cache-control none --launch-skip 1 --launch-count ${NCU_COUNT:-6} \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    "$B/dds_profile_sample" $s 3 >"$f" 2>&1
  grep -E '^  [a-z_]+.*\(|^  [a-z].*<|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|Grid Size|Block Size' "$f"
done
