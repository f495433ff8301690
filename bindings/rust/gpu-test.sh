#!/usr/bin/env bash
# Runs the Rust GPU test on the device, from the repository root:
#   bindings/rust/gpu-test.sh <dir holding the CUDA-enabled libdds.so.0, e.g. build-gpu>
# The binary was built by bindings/rust/prep-gpu.sh into .gpu-artifacts/rust/ (copy that path to the GPU machine).
# Exit status: the test binary's (0 = passed). Without a usable device the tests fail here
# (DDS_REQUIRE_GPU=1); DDS_REQUIRE_GPU=0 makes them print "skipped: no CUDA device" and pass.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
libdir="${1:?usage: bindings/rust/gpu-test.sh <CUDA-enabled libdds build dir, e.g. build-gpu>}"
libdir="$(cd "$libdir" && pwd)"
exe="$root/.gpu-artifacts/rust/dds-gpu-test"
if [ ! -x "$exe" ]; then
  echo "gpu-test.sh: $exe is missing: run bindings/rust/prep-gpu.sh (where cargo is) and copy .gpu-artifacts/rust to the GPU machine" >&2
  exit 2
fi
if ! ls "$libdir"/libdds.so* >/dev/null 2>&1; then
  echo "gpu-test.sh: no libdds.so in $libdir" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# On the device a missing GPU is a failure, not a skip (DDS_REQUIRE_GPU=0 to allow skipping).
export DDS_REQUIRE_GPU="${DDS_REQUIRE_GPU:-1}"
cd "$root"
echo "gpu-test.sh: $exe with libdds from $libdir"
exec "$exe" --test-threads=1 --nocapture
