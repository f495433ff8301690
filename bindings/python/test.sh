#!/usr/bin/env bash
# CI entry of the Python binding (called by scripts/test.sh; works standalone from anywhere):
#   bindings/python/test.sh
# 1. a fresh virtual environment under the build folder ($DDS_BUILD_DIR, else <repo>/build),
#    without the system's site packages, and `pip install ./bindings/python numpy pytest`: pip
#    alone, build isolation bringing scikit-build-core and SWIG from PyPI (no system SWIG); CPU
#    backend only (DDS_PY_WITH_CUDA=AUTO|ON to change);
# 2. pytest on the CPU backend (-m "not gpu"; tests/test_torch_compile.py skips when torch is
#    absent, as here: torch's wheels take minutes to install), then the gpu-marked tests, which
#    skip with their reason here - listed so the summary shows them;
# 3. the decode-loop demo (examples/python/demo.py) on the CPU backend;
# 4. a CPU wheel (scripts/build-wheel.sh --cpu, reusing the build tree of step 1) installed
#    into a clean venv with no compiler on PATH, running the README's quick start
#    (test-wheel.sh).
# Needs python3 with venv + headers, a C/C++ compiler, cmake and PyPI (scripts/common.sh
# installs the Debian parts). Exit status: nonzero if the install, any CPU test, the demo or
# the wheel test fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${DDS_BUILD_DIR:-$root/build}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"
venv="${DDS_PY_VENV:-$build/python-venv}"
py="${PYTHON:-python3}"
log() { printf '\n--- bindings/python: %s\n' "$*" >&2; }

log "creating a fresh $venv"
"$py" -m venv --clear "$venv"
vpy="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1

log "pip install ./bindings/python numpy pytest (DDS_WITH_CUDA=${DDS_PY_WITH_CUDA:-OFF})"
t0=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL="${DDS_JOBS:-2}" "$vpy" -m pip install -q \
  --config-settings=cmake.define.DDS_WITH_CUDA="${DDS_PY_WITH_CUDA:-OFF}" \
  --config-settings=cmake.define.DDS_SOURCE_DIR="$root" \
  --config-settings=build-dir="build/wheel-cpu-{wheel_tag}" \
  "$here" numpy pytest
log "installed in $((SECONDS - t0))s: $("$vpy" -c 'import dds; print("dds", dds.__version__, "at", dds.__file__)')"

# Run from the tests folder's parent but never import the source tree's src/dds (src layout).
cd "$here"
rc=0
log "pytest -m 'not gpu' (CPU backend)"
"$vpy" -m pytest -p no:cacheprovider -m "not gpu" -q -rs tests || rc=$?
log "pytest -m gpu (skipped here unless a CUDA device, torch or CuPy are present)"
gpu_rc=0
"$vpy" -m pytest -p no:cacheprovider -m gpu -q -rs tests || gpu_rc=$?
if ((gpu_rc != 0 && gpu_rc != 5)); then
  echo "bindings/python/test.sh: gpu-marked tests failed (exit $gpu_rc)" >&2
  rc=1
fi
log "examples/python/demo.py --backend cpu"
if ! (cd "$root" && "$vpy" examples/python/demo.py --backend cpu --steps 6); then
  echo "bindings/python/test.sh: the demo failed" >&2
  rc=1
fi
log "CPU wheel: scripts/build-wheel.sh --cpu, then test-wheel.sh (clean venv, no compiler)"
t0=$SECONDS
if ! whl="$(DDS_JOBS="${DDS_JOBS:-2}" bash "$root/scripts/build-wheel.sh" --cpu -o "$build/dist")" ||
   ! bash "$here/test-wheel.sh" "$whl"; then
  echo "bindings/python/test.sh: the wheel build or its test failed" >&2
  rc=1
fi
log "wheel built and tested in $((SECONDS - t0))s"
exit "$rc"
