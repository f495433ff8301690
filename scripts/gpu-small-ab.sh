#!/usr/bin/env bash
# On the GPU machine, from the repo root: checks small_plain_kernel (unfiltered rows of V <= 2048)
# against the general path (DDS_SAMPLE_SMALL=0): test_gpu_sample, the outputs of both paths
# compared byte for byte (dds_profile_sample's DDS_PROFILE_DUMP) on several shapes, the test again
# with DDS_SAMPLE_SMALL_EXACT=1 (every column scored exactly: the kernel's rare path), memcheck of
# the sanitizer case, A/B call times (scripts/ab-sample.sh) and, with NCU=1, ncu of the kernel.
# FILTER=1: the same for small_filter_kernel (filtered rows, knob DDS_SAMPLE_SMALL_FILTER, top-k /
# top-p / min-p shapes; racecheck instead of the EXACT run); KNOB=name compares under that knob
# (0 / 1) instead. Carry .gpu-artifacts/build
# (scripts/prep-gpu-final.sh). Logs under $OUT, a digest on stdout.
B=${B:-$PWD/.gpu-artifacts/build}; export B LD_LIBRARY_PATH=$B
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEF_KNOB=DDS_SAMPLE_SMALL
if [ "${FILTER:-0}" = 1 ]; then
  DEF_KNOB=DDS_SAMPLE_SMALL_FILTER
  CMP_SHAPES=${CMP_SHAPES:-f32 1025 4096 topk 1;bf16 1025 4096 topp 0.5;f32 1025 4096 minp 1;f32 1025 4096 topp 1;f32 2048 1000 topp 1;bf16 1100 300 topk 0.7;f32 1000 512 topp 2;bf16 1025 8 topk 1;f32 1024 777 minp 1;bf16 2048 64 topp 0.25}
  AB_SHAPES=${AB_SHAPES:-f32 1025 4096 topk;bf16 1025 4096 topk;f32 1025 4096 topp;bf16 1025 4096 topp;f32 1025 4096 minp;f32 1025 256 topk;f32 1025 256 topp;f32 1025 8 topk;f32 1025 8 topp;f32 2048 4096 topp;bf16 2048 4096 topk}
  NCU_SHAPES=${NCU_SHAPES:-f32 1025 4096 topk 1;f32 1025 4096 topp 1}
  NCU_KERNEL=small_filter
fi
KNOB=${KNOB:-$DEF_KNOB}  # (KNOB=DDS_SAMPLE_SMALL_CTA: the two forms of the small kernels)
if [ "${TESTS:-1}" = 1 ]; then
  timeout 250 "$B/test_gpu_sample" > "$OUT/test_gpu_sample.log" 2>&1; echo "test_gpu_sample rc=$?"
  tail -3 "$OUT/test_gpu_sample.log"
  if [ "${FILTER:-0}" = 1 ]; then
    timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 "$B/test_gpu_sample" -tc='*sanitizer*' > "$OUT/racecheck.log" 2>&1
    echo "racecheck rc=$?"; tail -2 "$OUT/racecheck.log"
  else
    DDS_SAMPLE_SMALL_EXACT=1 timeout 250 "$B/test_gpu_sample" > "$OUT/test_gpu_sample_exact.log" 2>&1
    echo "test_gpu_sample with DDS_SAMPLE_SMALL_EXACT=1 (small_plain_kernel's rare path everywhere) rc=$?"
    tail -3 "$OUT/test_gpu_sample_exact.log"
  fi
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_sample" -tc='*sanitizer*' > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
fi
OUT=$OUT KNOB=$KNOB SHAPES="${CMP_SHAPES:-f32 1025 4096 plain 1;bf16 1025 4096 plain 0.5;f32 1025 4096 plain 0;f32 2048 4096 plain 1;bf16 2048 1000 plain 0.7;f32 1000 512 plain 1;bf16 1100 300 plain 1;f32 1152 64 plain 2;f32 1024 777 plain 1;bf16 1025 8 plain 1}" bash scripts/cmp-knob.sh
KNOB=$KNOB VALUES="0 1" CALLS=${CALLS:-30} SHAPES="${AB_SHAPES:-f32 1025 4096 plain;bf16 1025 4096 plain;f32 1025 4096 plain 0.5;bf16 1025 4096 plain 0;f32 1025 256 plain;bf16 1025 256 plain;f32 1025 8 plain;f32 2048 4096 plain;bf16 2048 4096 plain;f32 1024 4096 plain;bf16 1100 4096 plain}" \
  bash scripts/ab-sample.sh | tee "$OUT/ab.log"
if [ "${NCU:-0}" = 1 ]; then
  KERNEL=${NCU_KERNEL:-small_plain} LC=1 SHAPES="${NCU_SHAPES:-f32 1025 4096 plain 1;bf16 1025 4096 plain 1}" timeout 200 bash scripts/ncu-filter.sh
  for f in "$OUT"/ncu_filter_*.txt; do
    grep -E "^  [a-z_]+.*${NCU_KERNEL:-small_plain}|Duration|Executed Instructions  |Issued Warp Per|Achieved Occupancy|Registers Per|Local Memory Spill|No Eligible" "$f" | head -12
  done
fi
