#!/usr/bin/env bash
# Runs the Go GPU test binary built by prep-gpu.sh, on the device, from the repository root:
#   bindings/go/gpu-test.sh <CUDA-enabled libdds build dir> [extra -test.* flags]
# Runs every test of the package against that libdds (CPU tests too) with -test.v. Fails when the
# CUDA tests skipped (no device, or a libdds without CUDA), unless DDS_GPU_ALLOW_SKIP=1.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: bindings/go/gpu-test.sh <CUDA-enabled libdds build dir> [-test.run ...]" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="$root/.gpu-artifacts/go/dds-go-gpu.test"
if [ ! -x "$bin" ]; then
  echo "gpu-test.sh: $bin is missing: run bindings/go/prep-gpu.sh where Go is installed, and copy .gpu-artifacts to the GPU machine" >&2
  exit 2
fi
lib="$(cd "$1" && pwd)"
shift
if [ ! -e "$lib/libdds.so.0" ]; then
  echo "gpu-test.sh: no libdds.so.0 in $lib" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$here" # the vector tests read ../../tests/vectors
log="$(mktemp)"
set +e
"$bin" -test.v -test.count=1 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if grep -q -- "--- SKIP: TestCUDA" "$log"; then
  echo "gpu-test.sh: THE CUDA TESTS SKIPPED (see the SKIP lines above)"
  if [ "${DDS_GPU_ALLOW_SKIP:-0}" != 1 ] && [ $rc = 0 ]; then rc=3; fi
fi
grep -E -- "^(--- FAIL|ok|FAIL|PASS)" "$log" | tail -n 20 || true
rm -f "$log"
exit $rc
