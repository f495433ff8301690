#!/usr/bin/env bash
# On the device machine: build the stash GPU test and dds_bench for sm_90, run the test,
# compute-sanitizer memcheck over it, and the stash benchmark. Logs in $OUT (default ./gpu-out).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
rc=0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 
t0=$SECONDS
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
         -DDDS_DOCTEST_DIR="$PWD/.deps/include" -DDDS_BUILD_EXAMPLES=OFF &&
       ninja -C "$BUILD" test_gpu_stash dds_bench; } > "$OUT/build.log" 2>&1; then
  tail -60 "$OUT/build.log"
  exit 1
fi
echo "=== build ok ($((SECONDS - t0)) s)"
t0=$SECONDS
echo "=== test_gpu_stash"
timeout "${TEST_TIMEOUT:-150}" "$BUILD"/tests/test_gpu_stash 2>&1 | tee "$OUT/test.log" || rc=1
echo "=== test done ($((SECONDS - t0)) s)"
t0=$SECONDS
echo "=== compute-sanitizer memcheck"
timeout "${SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$BUILD"/tests/test_gpu_stash ${SANITIZE_ARGS:-} > "$OUT/memcheck.log" 2>&1 || rc=1
grep -E "ERROR SUMMARY|test cases|assertions|Invalid|out of bounds" "$OUT/memcheck.log" | head -20
tail -5 "$OUT/memcheck.log"
echo "=== memcheck done ($((SECONDS - t0)) s)"
t0=$SECONDS
echo "=== dds_bench --only stash"
timeout "${BENCH_TIMEOUT:-150}" "$BUILD"/bench/dds_bench --only stash ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" || rc=1
echo "=== bench done ($((SECONDS - t0)) s), rc=$rc"
exit $rc
