#!/usr/bin/env bash
# On the device machine (the `run` tool ships the working tree there): build with CUDA for sm_90,
# run the GPU tests, compute-sanitizer (memcheck + racecheck) over the GPU test binaries, and the
# benchmark. Logs go to $OUT (default ./gpu-out). Every step runs even when an earlier one fails;
# the script exits non-zero if any step failed and prints a summary last.
#
# At most 8 files come back from $OUT: keep one log per step (5 now + summary).
# Adding a step (e.g. bindings' GPU tests): append a line `step <name> <command...>` at the end of
# the STEPS section; its output lands in $OUT/<name>.log and in the summary.
#
# Environment: OUT (log folder), BUILD (build dir, default build-gpu), GPU_CHECK_ONLY (space-
# separated step names to run, default all), BENCH_ARGS (e.g. --quick), SANITIZE_EXCLUDE (doctest
# -tce filter: test cases the sanitizer runs skip), SANITIZE_TIMEOUT (seconds per
# sanitizer run of one test binary, default 300), RACECHECK_EXCLUDE (racecheck's own -tce filter;
# default SANITIZE_EXCLUDE), SANITIZE_BINARIES (regex of test binary names the sanitizers run).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
declare -a SUMMARY=()
FAILED=0
step() {
  local name=$1
  shift
  if [ -n "${GPU_CHECK_ONLY:-}" ] && [[ " $GPU_CHECK_ONLY " != *" $name "* ]]; then return 0; fi
  local t0=$SECONDS
  echo "=== [$name]"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  SUMMARY+=("$(printf '%-22s rc=%-4s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" -eq 0 ] || FAILED=1
  return 0
}
gpu_tests() { ls "$BUILD"/tests/test_gpu_* 2>/dev/null | grep -v '\.' ; }
# Binaries the sanitizers run (basename regex; default all GPU test binaries).
san_tests() { gpu_tests | grep -E "/(${SANITIZE_BINARIES:-test_gpu_.*})\$" ; }
run_gpu_tests() {
  local rc=0
  for t in $(gpu_tests); do
    echo "--- $t"
    "$t" || rc=1
  done
  return $rc
}
sanitize() {
  local tool=$1 rc=0
  for t in $(san_tests); do
    echo "--- compute-sanitizer --tool $tool $t"
    local args=()
    local ex=${SANITIZE_EXCLUDE:-}
    [ "$tool" = racecheck ] && ex=${RACECHECK_EXCLUDE:-$ex}
    [ -n "$ex" ] && args+=("-tce=$ex")
    timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 3 "$t" "${args[@]}" || rc=1
  done
  return $rc
}

# --- STEPS -------------------------------------------------------------------------------------
GPU_NAME=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
build() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDDS_DOCTEST_DIR="$PWD/.deps/include" -DDDS_BUILD_EXAMPLES=OFF && ninja -C "$BUILD"
}
step build build
step gpu-tests run_gpu_tests
step bench "$BUILD"/bench/dds_bench ${BENCH_ARGS:-}
step memcheck sanitize memcheck
step racecheck sanitize racecheck
# (append new steps above this line)
# --- SUMMARY -----------------------------------------------------------------------------------
{
  echo "=== gpu-check summary ($(date -u +%FT%TZ), ${GPU_NAME:-unknown GPU})"
  printf '%s\n' "${SUMMARY[@]}"
} | tee "$OUT/summary.txt"
exit $FAILED
