#!/usr/bin/env bash
# On the GPU machine, from the repo root: ncu of the filtered-row kernels on dds_profile_sample
# shapes ("dtype V rows scenario [temperature]"), with source counters.
#   SHAPES="f32 262144 512 topp 1;f32 262144 512 topp 0.5" bash scripts/ncu-filter.sh
#   KERNEL=regex (default filter_kernel), LC = launches profiled after the first one (default 1),
#   KEEP_CSV=1 keeps the per-SASS-instruction CSV ($OUT/ncu_<kernel>_<shape>_sass.csv.gz).
# Writes $OUT/ncu_filter_<shape>.txt (sections) and a digest of the source counters per SASS
# instruction, $OUT/ncu_filter_<shape>_sass.txt (scripts/ncu-src-digest.py; ncu's CUDA-line view
# has no metric columns in CSV form).
set -u
B=${B:-$PWD/.gpu-artifacts/build}
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
IFS=';' read -ra shapes <<<"${SHAPES:-f32 262144 512 topp 1}"
for s in "${shapes[@]}"; do
  read -r dt V R sc T <<<"$s"
  tag=$(echo "$s" | tr ' .' '__')
  ncu --clock-control none --kernel-name regex:${KERNEL:-filter_kernel} --launch-skip 1 --launch-count ${LC:-1} \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section SourceCounters --import-source yes -o "$OUT/rep_$tag" -f \
    "$B/dds_profile_sample" $dt $V $R $sc 3 ${T:-1} > "$OUT/ncu_filter_${tag}.log" 2>&1
  ncu -i "$OUT/rep_$tag.ncu-rep" --print-details all > "$OUT/ncu_filter_${tag}.txt" 2>&1
  for v in sass; do
    ncu -i "$OUT/rep_$tag.ncu-rep" --page source --csv --print-source $v > "$OUT/src.csv" 2>/dev/null
    python3 scripts/ncu-src-digest.py "$OUT/src.csv" ${TOP:-40} > "$OUT/ncu_filter_${tag}_$v.txt" 2>&1
    # KEEP_CSV=1: the whole per-instruction CSV too (gzip), to join with nvdisasm's line info
    [ "${KEEP_CSV:-0}" = 1 ] && gzip -c "$OUT/src.csv" > "$OUT/ncu_${KERNEL:-filter_kernel}_${tag}_$v.csv.gz"
  done
  rm -f "$OUT/rep_$tag.ncu-rep" "$OUT/src.csv"
  echo "### $s"
  grep -E 'Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Issued Warp|No Eligible|Theoretical Occupancy|Block Limit' "$OUT/ncu_filter_${tag}.txt" | head -14
done
