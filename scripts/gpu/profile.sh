#!/usr/bin/env bash
# Nsight Compute profile of dds_sample or dds_stash_logprobs on a few shapes. Run on the GPU
# machine from a checkout:
#
#   scripts/gpu/profile.sh BUILD OUT_DIR sample|stash 'SHAPE[;SHAPE...]'
#
# A sample shape is "dtype V rows scenario [temperature]" (dds_profile_sample: scenario
# plain|guided|topk|topp|minp|mix; T 0.5 / 0.25 gives rows shaped like sigma 4 / 8); a stash shape
# is "dtype V rows keep_every n" (dds_profile_stash). Per shape: the median call time (30 calls,
# CUDA events) and an ncu report of the kernels of a later call, OUT_DIR/ncu_<op>_<shape>.txt
# (every section printed), of which the headline figures (duration, DRAM and SM throughput,
# occupancy, registers, issue rate, stalls) are printed here.
#
# Environment:
#   KERNEL=regex   profile only kernels whose name matches (e.g. plain_pass, filter_kernel)
#   SKIP, COUNT    launches skipped and profiled (default 2 and 8; 1 and 1 with KERNEL)
#   SOURCE=1       also source counters: OUT_DIR/ncu_<op>_<shape>_sass.txt lists the SASS
#                  instructions with the most executions and stall samples (ncu-digest.py), and
#                  OUT_DIR/ncu_<op>_<shape>_sass.csv.gz keeps the whole per-instruction table for
#                  sass-lines.py (per source line)
#   INTERVAL=N     with SOURCE=1: one stall sample every 2^(5+N) cycles per SM sub-partition
#                  (ncu --warp-sampling-interval; default auto, which gives a short kernel few)
#   FLAGS          extra arguments for the profiling program
set -u -o pipefail
. "$(dirname "$0")/lib.sh"
[ $# -eq 4 ] || dds_gpu_die "usage: scripts/gpu/profile.sh BUILD OUT_DIR sample|stash 'SHAPE;...'"
B=$(dds_gpu_abs_build "$1")
mkdir -p "$2" && out=$(cd "$2" && pwd)
op=$3
case $op in
  sample | stash) prog=$(dds_gpu_bin "$B" "dds_profile_$op") || dds_gpu_die "no dds_profile_$op in $B" ;;
  *) dds_gpu_die "operation must be sample or stash" ;;
esac
dds_gpu_use_build "$B"
here=$(cd "$(dirname "$0")" && pwd)
dds_gpu_name
sel=(--launch-skip "${SKIP:-2}" --launch-count "${COUNT:-8}")
if [ -n "${KERNEL:-}" ]; then
  sel=(--kernel-name "regex:$KERNEL" --launch-skip "${SKIP:-1}" --launch-count "${COUNT:-1}")
fi
src=()
[ "${SOURCE:-0}" = 1 ] && src=(--section SourceCounters --import-source yes)
[ "${SOURCE:-0}" = 1 ] && [ -n "${INTERVAL:-}" ] && src+=(--warp-sampling-interval "$INTERVAL")
IFS=';' read -ra shapes <<<"$4"
for s in "${shapes[@]}"; do
  read -r a1 a2 a3 a4 a5 <<<"$s"
  # calls come before the temperature in dds_profile_sample's arguments, last in dds_profile_stash's
  if [ "$op" = sample ]; then args() { echo "$a1 $a2 $a3 $a4 $1 ${a5:-1}"; }; else args() { echo "$s $1"; }; fi
  tag="${op}_$(echo "$s" | tr ' .' '__')"
  echo "### $s: $("$prog" $(args 30) ${FLAGS:-} | tail -1)"
  ncu --clock-control none "${sel[@]}" --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis "${src[@]}" \
    -o "$out/rep_$tag" -f "$prog" $(args 4) ${FLAGS:-} >"$out/ncu_$tag.log" 2>&1 ||
    { tail -5 "$out/ncu_$tag.log"; continue; }
  ncu -i "$out/rep_$tag.ncu-rep" --print-details all >"$out/ncu_$tag.txt" 2>&1
  grep -E '^  [a-z_]+.*(\(|<)|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Issued Warp|No Eligible|Warp Cycles Per Issued|Local Memory Spill' \
    "$out/ncu_$tag.txt" | head -40
  if [ "${SOURCE:-0}" = 1 ]; then
    ncu -i "$out/rep_$tag.ncu-rep" --page source --csv --print-source sass >"$out/src.csv" 2>/dev/null
    python3 "$here/ncu-digest.py" "$out/src.csv" "${TOP:-40}" >"$out/ncu_${tag}_sass.txt" 2>&1
    gzip -c "$out/src.csv" >"$out/ncu_${tag}_sass.csv.gz"
    rm -f "$out/src.csv"
  fi
  rm -f "$out/rep_$tag.ncu-rep"
done
