#!/usr/bin/env bash
# One device run that checks everything GPU-side: the C GPU tests, compute-sanitizer memcheck on
# the smaller GPU tests, the Python, Rust and Go GPU tests, and the benchmarks against the peers
# (bench/peers) and of dds_reveal. Run ON the GPU machine from the repository root.
#
# Prepared here (no device time spent compiling):
#   scripts/prep-gpu-final.sh   # builds .gpu-artifacts/build (libdds + gpu tests, sm_90),
#                               # the Rust and Go GPU test binaries, the Python SWIG wrapper
# and the call carries .gpu-artifacts, bindings/python/_generated, .deps and .vllm.
# If the prebuilt binaries do not run there, it builds with cmake/ninja instead.
#
# GPU_FINAL_STEPS="bindings peers" runs only those steps; PEERS_BUDGET / PEERS_TIMEOUT (seconds).
# Output ($OUT, at most 8 files): summary.txt, c-gpu.log, memcheck.log, python.log,
# bindings.log (Rust + Go), peers.log, decode.log, results.tar (docs/benchmarks).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
B=$PWD/.gpu-artifacts/build
declare -a SUMMARY=()
FAILED=0
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${GPU_FINAL_STEPS:-}" ] && [[ " $GPU_FINAL_STEPS " != *" $name "* ]]; then return 0; fi
  local t0=$SECONDS
  echo "=== [$name] $(date -u +%T)"
  timeout "$limit" bash -c "$*" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$OUT/$name.log"
  SUMMARY+=("$(printf '%-10s rc=%-4s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" -eq 0 ] || FAILED=1
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export B OUT
if ! "$B/test_gpu_reveal" --list-test-cases >/dev/null 2>&1; then
  echo "prebuilt binaries do not run here: building"
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDDS_DOCTEST_DIR="$PWD/.deps/include" -DDDS_BUILD_EXAMPLES=OFF >/dev/null &&
    ninja -C build-gpu >/dev/null || exit 1
  mkdir -p "$B" && cp -a build-gpu/libdds.so* build-gpu/tests/test_gpu_* "$B"/
fi

c_gpu() {
  local rc=0
  for t in "$B"/test_gpu_*; do
    echo "--- $t"
    "$t" || rc=1
  done
  return $rc
}
memcheck() {
  local rc=0
  echo "--- memcheck test_gpu_sample (sanitizer case)"
  compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_sample" -tc='*sanitizer*' || rc=1
  for t in test_gpu_reveal test_gpu_stash test_gpu_reliability; do
    echo "--- memcheck $t"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$B/$t" || rc=1
  done
  return $rc
}
python_gpu() {
  DDS_PY_GPU_LOG=none DDS_PY_LIB="$B/libdds.so.0" bash bindings/python/gpu-test.sh
}
bindings() {
  local rc=0
  echo "--- rust"
  bash bindings/rust/gpu-test.sh "$B" || rc=1
  echo "--- go"
  bash bindings/go/gpu-test.sh "$B" || rc=1
  return $rc
}
peers() { DDS_LIB="$B/libdds.so" python3 bench/peers/run.py --budget "${PEERS_BUDGET:-120}"; }
decode() { DDS_LIB="$B/libdds.so" python3 bench/peers/decode_bench.py; }
export -f c_gpu memcheck python_gpu bindings peers decode

step c-gpu 150 c_gpu
step python 120 python_gpu
step bindings 45 bindings
export PEERS_BUDGET=${PEERS_BUDGET:-90}
step peers "${PEERS_TIMEOUT:-150}" peers
step decode 30 decode
step memcheck 60 memcheck
tar -cf "$OUT/results.tar" docs/benchmarks 2>/dev/null
{
  echo "=== gpu-final summary ($(date -u +%FT%TZ))"
  printf '%s\n' "${SUMMARY[@]}"
} | tee -a "$OUT/summary.txt"
exit $FAILED
