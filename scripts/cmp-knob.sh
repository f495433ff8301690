#!/usr/bin/env bash
# On the GPU machine, from the repo root: dds_profile_sample's outputs (DDS_PROFILE_DUMP: tokens,
# argmax and statistics of the last call) under KNOB=0 and KNOB=1 compared byte for byte, for each
# shape of SHAPES ("dtype V rows scenario [temperature]", ';'-separated). Used by
# scripts/gpu-small-ab.sh and scripts/gpu-fuse-ab.sh; prints one line per shape.
B=${B:-$PWD/.gpu-artifacts/build}; export LD_LIBRARY_PATH=$B
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
: "${KNOB:?KNOB=name of the environment knob}" "${SHAPES:?SHAPES=shapes}"
IFS=';' read -ra shapes <<<"$SHAPES"
for s in "${shapes[@]}"; do
  read -r dt V R sc T <<<"$s"
  rm -f "$OUT"/dump*.bin  # (a failed run must not leave the previous shape's dump to compare)
  ok=1
  for k in 0 1; do
    env "$KNOB=$k" DDS_PROFILE_DUMP="$OUT/dump$k.bin" "$B/dds_profile_sample" $dt $V $R $sc 3 ${T:-1} > /dev/null || ok=0
    [ -s "$OUT/dump$k.bin" ] || ok=0
  done
  if [ $ok = 0 ]; then echo "RUN FAILED: $s"
  elif cmp -s "$OUT/dump0.bin" "$OUT/dump1.bin"; then echo "identical outputs: $s"
  else echo "OUTPUTS DIFFER: $s"; fi
done
rm -f "$OUT"/dump*.bin
