#!/usr/bin/env bash
# compute-sanitizer racecheck and initcheck (memcheck is in gpu-final.sh) over the GPU tests,
# from the prebuilt binaries of scripts/prep-gpu-final.sh. Run ON the GPU machine from the repo
# root; one log per tool under $OUT. test_gpu_sample runs its small sanitizer case (the parity
# sweeps are too large for the sanitizers' slowdown).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
B=$PWD/.gpu-artifacts/build
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
FAILED=0
for tool in racecheck initcheck; do
  {
    for t in "test_gpu_sample -tc=*sanitizer*" test_gpu_reveal test_gpu_stash test_gpu_shard \
             test_gpu_reliability; do
      set -- $t
      echo "--- $tool $*"
      timeout "${SANITIZE_TIMEOUT:-100}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
        "$B/$1" "${@:2}" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test cases|Status|Error|error|hazard" | head -20
      echo "rc=${PIPESTATUS[0]}"
    done
  } > "$OUT/$tool.log" 2>&1
  cat "$OUT/$tool.log"
  grep -q "rc=[^0]" "$OUT/$tool.log" && FAILED=1
done
exit $FAILED
