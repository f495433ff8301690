#!/usr/bin/env bash
# On the GPU machine, from the repo root: median call times and per-kernel ncu figures (duration,
# DRAM / SM throughput, occupancy, registers, stalls) for a few shapes, from .gpu-artifacts/build
# (scripts/prep-gpu-final.sh). Writes $OUT/ncu_<op>_<shape>.txt and prints a digest.
#   OP=sample (default): dds_profile_sample, SHAPES="dtype V rows scenario;..."
#   OP=stash: dds_profile_stash, SHAPES="dtype V rows keep_every n;...", the stash kernel's
#             scheduler and source counters too
# NCU=0 prints the times only.
set -u
B=${B:-$PWD/.gpu-artifacts/build}
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
OP=${OP:-sample}
if [ "$OP" = stash ]; then
  prog=dds_profile_stash
  def="bf16 32000 256 16 5;bf16 32000 256 16 20;bf16 32000 4096 1 20;f32 262144 256 16 20"
  opts=(--kernel-name regex:stash_kernel --launch-skip 2 --launch-count 1 --section SchedulerStats
        --section SourceCounters)
else
  prog=dds_profile_sample
  def="f32 1025 4096 plain;bf16 1025 4096 plain;bf16 262144 4096 plain;f32 1025 4096 topk"
  opts=(--cache-control none --launch-skip 1 --launch-count "${NCU_COUNT:-6}")
fi
IFS=';' read -ra shapes <<<"${SHAPES:-$def}"
for s in "${shapes[@]}"; do
  echo "### $s: $("$B/$prog" $s 30 | tail -1)"
  [ "${NCU:-1}" = 1 ] || continue
  f="$OUT/ncu_${OP}_$(echo $s | tr ' ' _).txt"
  ncu --clock-control none "${opts[@]}" --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats "$B/$prog" $s 3 >"$f" 2>&1
  grep -E '^  [a-z_]+.*\(|^  [a-z].*<|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Warp Cycles Per Issued|Grid Size|Block Size|Issued Warp|No Eligible' "$f"
done
