#!/usr/bin/env bash
# On the GPU machine, from the repo root: median dds_sample call times (dds_profile_sample,
# CUDA events) for a list of shapes under each value of an environment knob, for A/B runs.
#   KNOB=DDS_SAMPLE_FUSE VALUES="0 1" SHAPES="f32 1025 4096 plain;..." bash scripts/ab-sample.sh
# A shape is "dtype V rows scenario [temperature]" (dds_profile_sample's arguments).
# KNOB=LIB: VALUES are directories holding a libdds.so.0 (e.g. a baseline build against the new).
set -u
B=${B:-$PWD/.gpu-artifacts/build}
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
KNOB=${KNOB:-DDS_SAMPLE_FUSE}
IFS=';' read -ra shapes <<<"${SHAPES:-f32 1025 4096 plain;bf16 1025 4096 plain;f32 262144 4096 plain;bf16 262144 4096 plain;bf16 151936 4096 plain;f32 32000 4096 plain;f32 1025 256 plain;f32 262144 256 plain;f32 262144 8 plain;f32 32000 8 plain}"
for s in "${shapes[@]}"; do
  line="$s:"
  read -r dt V R sc T <<<"$s"
  args="$dt $V $R $sc ${CALLS:-30} ${T:-1}"
  for v in ${VALUES:-0 1}; do
    if [ "$KNOB" = LIB ]; then
      t=$(LD_LIBRARY_PATH="$v:$LD_LIBRARY_PATH" "$B/dds_profile_sample" $args | sed -n 's/.*median \([0-9.]*\) us.*/\1/p')
    else
      t=$(env "$KNOB=$v" "$B/dds_profile_sample" $args | sed -n 's/.*median \([0-9.]*\) us.*/\1/p')
    fi
    line="$line  $KNOB=$v ${t:-FAIL} us"
  done
  echo "$line"
done
