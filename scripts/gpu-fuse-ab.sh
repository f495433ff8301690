#!/usr/bin/env bash
# On the GPU machine, from the repo root: the unfiltered pass with the finish inside it
# (DDS_SAMPLE_FUSE=1: the row's last warp finishes it) against the separate finish kernels
# (DDS_SAMPLE_FUSE=0): test_gpu_sample, memcheck and racecheck of its sanitizer case, the outputs
# of both paths compared byte for byte (dds_profile_sample's DDS_PROFILE_DUMP) on several shapes,
# A/B call times under DDS_SAMPLE_FUSE=0/1 and under several blocks per warp (DDS_SAMPLE_BPW).
# Used in the ninth session for a persistent fused pass (docs/device-runs.md; not landed).
# Carry .gpu-artifacts/build (scripts/prep-gpu-final.sh). Logs under $OUT, a digest on stdout.
# STEPS="tests cmp ab bpw" picks steps; CMP_SHAPES / AB_SHAPES / BPW_SHAPES / BPW_VALUES override.
B=${B:-$PWD/.gpu-artifacts/build}; export B LD_LIBRARY_PATH=$B
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
on() { [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if on tests; then
  timeout 300 "$B/test_gpu_sample" > "$OUT/test_gpu_sample.log" 2>&1; echo "test_gpu_sample rc=$?"
  grep -E "1024\+ rows" "$OUT/test_gpu_sample.log" | head -8
  tail -3 "$OUT/test_gpu_sample.log"
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_sample" -tc='*sanitizer*' > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
  timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 "$B/test_gpu_sample" -tc='*sanitizer*' > "$OUT/racecheck.log" 2>&1
  echo "racecheck rc=$?"; tail -2 "$OUT/racecheck.log"
fi
if on cmp; then
  OUT=$OUT KNOB=DDS_SAMPLE_FUSE SHAPES="${CMP_SHAPES:-f32 32000 4096 plain 1;bf16 32000 4096 plain 0.5;f32 262144 1024 plain 1;bf16 151936 2048 plain 1;f32 40000 1500 mix 1;bf16 262144 4096 plain 1;f32 17000 4096 plain 0}" bash scripts/cmp-knob.sh
fi
if on ab; then
  KNOB=DDS_SAMPLE_FUSE VALUES="0 1" CALLS=${CALLS:-20} SHAPES="${AB_SHAPES:-f32 32000 4096 plain;bf16 32000 4096 plain;f32 151936 4096 plain;bf16 151936 4096 plain;f32 262144 4096 plain;bf16 262144 4096 plain;f32 32000 1024 plain;bf16 32000 2048 plain;f32 262144 1024 plain;f32 32000 4096 guided}" \
    bash scripts/ab-sample.sh | tee "$OUT/ab.log"
fi
if on bpw; then
  KNOB=DDS_SAMPLE_BPW VALUES="${BPW_VALUES:-2 4 8 16}" CALLS=${CALLS:-20} SHAPES="${BPW_SHAPES:-f32 32000 4096 plain;bf16 32000 4096 plain;bf16 151936 4096 plain;bf16 262144 4096 plain}" \
    bash scripts/ab-sample.sh | tee "$OUT/bpw.log"
fi
