#!/usr/bin/env bash
# On the GPU machine, from the repo root: the v2 stash kernel (DDS_STASH_V2=1) and its mode 2
# (DDS_STASH_V2=2: v2 without the 16-bit tile pipeline) against v1: test_gpu_stash under each,
# memcheck and racecheck (by test case) under each v2 mode, the outputs compared byte for byte
# with v1's (dds_profile_stash's DDS_PROFILE_DUMP) and A/B median call times on the bench's
# shapes. MODES (default "0 1 2") picks the modes, the first the reference; RC_MODES (default:
# the others) those that memcheck and racecheck run under (racecheck can take 2 minutes a case).
# Carry .gpu-artifacts/build (scripts/prep-gpu-final.sh). Logs under $OUT, a digest on stdout.
# A shape is "dtype V rows keep_every n" (dds_profile_stash's arguments).
B=${B:-$PWD/.gpu-artifacts/build}; export B LD_LIBRARY_PATH=$B
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
read -ra modes <<<"${MODES:-0 1 2}"
for v in "${modes[@]}"; do
  DDS_STASH_V2=$v timeout 120 "$B/test_gpu_stash" > "$OUT/test_gpu_stash_v$v.log" 2>&1
  echo "test_gpu_stash DDS_STASH_V2=$v rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/test_gpu_stash_v$v.log")"
done
read -ra rc_modes <<<"${RC_MODES:-${modes[*]:1}}"
for v in "${rc_modes[@]}"; do
  DDS_STASH_V2=$v timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_stash" > "$OUT/stash_memcheck_v$v.log" 2>&1
  echo "memcheck (DDS_STASH_V2=$v) rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/stash_memcheck_v$v.log")"
  # racecheck one test case at a time (the whole binary ran past 150 s; "large n" alone past 100 s)
  for tc in "*parity*" "*mostly*" "*large n*" "*many kept*" "*graph*"; do
    DDS_STASH_V2=$v timeout ${RC_TIMEOUT:-120} compute-sanitizer --tool racecheck --error-exitcode 3 "$B/test_gpu_stash" -tc="$tc" > "$OUT/stash_racecheck_v$v.log" 2>&1
    echo "racecheck (DDS_STASH_V2=$v) $tc rc=$? $(grep -E 'RACECHECK SUMMARY|test cases' "$OUT/stash_racecheck_v$v.log" | tr '\n' ' ')"
    grep -E "Race reported" "$OUT/stash_racecheck_v$v.log" | sort | uniq -c | head -5
  done
done
IFS=';' read -ra shapes <<<"${SHAPES:-bf16 32000 256 16 5;bf16 32000 256 16 20;bf16 32000 256 1 5;bf16 262144 256 16 5;bf16 262144 256 16 20;f32 32000 256 16 5;f32 262144 256 16 20;bf16 32000 4096 16 5;bf16 32000 4096 1 20;f32 32000 4096 16 20;bf16 262144 4096 16 20;bf16 262144 4096 1 5;f32 262144 4096 1 5;f32 1025 64 1 20;bf16 7 100 3 5}"
for s in "${shapes[@]}"; do
  read -r dt V R K N <<<"$s"
  line="$s:"
  for v in "${modes[@]}"; do
    t=$(DDS_STASH_V2=$v DDS_PROFILE_DUMP="$OUT/st$v.bin" "$B/dds_profile_stash" $dt $V $R $K $N ${CALLS:-25} | sed -n 's/.*median \([0-9.]*\) us.*/\1/p')
    line="$line  v$v ${t:-FAIL} us"
  done
  for v in "${modes[@]:1}"; do
    if cmp -s "$OUT/st${modes[0]}.bin" "$OUT/st$v.bin"; then line="$line  v$v identical"; else line="$line  v$v OUTPUTS DIFFER"; fi
  done
  echo "$line"
  rm -f "$OUT"/st?.bin
done
