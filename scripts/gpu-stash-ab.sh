#!/usr/bin/env bash
# On the GPU machine, from the repo root: the v2 stash kernel (DDS_STASH_V2=1) against v1:
# test_gpu_stash under both, memcheck and racecheck (by test case) under v2, the outputs of both compared byte for byte
# (dds_profile_stash's DDS_PROFILE_DUMP) and A/B median call times on the bench's shapes.
# Carry .gpu-artifacts/build (scripts/prep-gpu-final.sh). Logs under $OUT, a digest on stdout.
# A shape is "dtype V rows keep_every n" (dds_profile_stash's arguments).
B=${B:-$PWD/.gpu-artifacts/build}; export B LD_LIBRARY_PATH=$B
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
for v in 0 1; do
  DDS_STASH_V2=$v timeout 120 "$B/test_gpu_stash" > "$OUT/test_gpu_stash_v$v.log" 2>&1
  echo "test_gpu_stash DDS_STASH_V2=$v rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/test_gpu_stash_v$v.log")"
done
DDS_STASH_V2=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_stash" > "$OUT/stash_memcheck_v2.log" 2>&1
echo "memcheck (v2) rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/stash_memcheck_v2.log")"
# racecheck one test case at a time (the whole binary ran past 150 s; "large n" alone past 100 s)
for tc in "*parity*" "*mostly*" "*large n*" "*many kept*" "*graph*"; do
  DDS_STASH_V2=1 timeout ${RC_TIMEOUT:-120} compute-sanitizer --tool racecheck --error-exitcode 3 "$B/test_gpu_stash" -tc="$tc" > "$OUT/stash_racecheck_v2.log" 2>&1
  echo "racecheck (v2) $tc rc=$? $(grep -E 'RACECHECK SUMMARY|test cases' "$OUT/stash_racecheck_v2.log" | tr '\n' ' ')"
  grep -E "Race reported" "$OUT/stash_racecheck_v2.log" | sort | uniq -c | head -5
done
IFS=';' read -ra shapes <<<"${SHAPES:-bf16 32000 256 16 5;bf16 32000 256 16 20;bf16 32000 256 1 5;bf16 262144 256 16 5;bf16 262144 256 16 20;f32 32000 256 16 5;f32 262144 256 16 20;bf16 32000 4096 16 5;bf16 32000 4096 1 20;f32 32000 4096 16 20;bf16 262144 4096 16 20;f32 262144 4096 1 5;f32 1025 64 1 20;bf16 7 100 3 5}"
for s in "${shapes[@]}"; do
  read -r dt V R K N <<<"$s"
  line="$s:"
  for v in 0 1; do
    t=$(DDS_STASH_V2=$v DDS_PROFILE_DUMP="$OUT/st$v.bin" "$B/dds_profile_stash" $dt $V $R $K $N ${CALLS:-25} | sed -n 's/.*median \([0-9.]*\) us.*/\1/p')
    line="$line  v$v ${t:-FAIL} us"
  done
  if cmp -s "$OUT/st0.bin" "$OUT/st1.bin"; then line="$line  identical"; else line="$line  OUTPUTS DIFFER"; fi
  echo "$line"
  rm -f "$OUT"/st?.bin
done
