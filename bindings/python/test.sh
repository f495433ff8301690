#!/usr/bin/env bash
# CI entry of the Python binding (called by scripts/test.sh; works standalone from anywhere):
#   bindings/python/test.sh
# 1. a virtual environment under the build folder ($DDS_BUILD_DIR, else <repo>/build), with the
#    system's site packages visible (so preinstalled numpy / pytest / scikit-build-core are used);
# 2. `pip install ./bindings/python pytest numpy`: scikit-build-core builds libdds and the SWIG
#    extension (CPU backend only by default, for speed: DDS_PY_WITH_CUDA=AUTO|ON to change);
# 3. pytest on the CPU backend (-m "not gpu"), then the gpu-marked tests, which skip with their
#    reason here (no CUDA device / no torch / no CuPy) - listed so the summary shows them;
# 4. the decode-loop demo (examples/python/demo.py) on the CPU backend.
# Needs python3 with venv + headers, a C/C++ compiler, cmake and SWIG (scripts/common.sh installs
# them on Debian). Exit status: nonzero if the install or any CPU test fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${DDS_BUILD_DIR:-$root/build}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"
venv="${DDS_PY_VENV:-$build/python-venv}"
py="${PYTHON:-python3}"
log() { printf '\n--- bindings/python: %s\n' "$*" >&2; }

if ! command -v swig >/dev/null 2>&1 && [[ ! -f "$here/_generated/dds_wrap.c" && -z "${DDS_SWIG_WRAPPER:-}" ]]; then
  if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
    log "installing swig"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends swig >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends swig >/dev/null; }
  else
    echo "bindings/python/test.sh: SWIG is missing (apt-get install swig)" >&2
    exit 2
  fi
fi

if [[ ! -x "$venv/bin/python" ]]; then
  log "creating $venv"
  "$py" -m venv --system-site-packages "$venv"
fi
vpy="$venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# Build isolation needs an index; when the venv already sees scikit-build-core (system site
# packages), build without isolation: faster and works offline.
pip_build=()
if "$vpy" -c "import scikit_build_core" >/dev/null 2>&1; then
  pip_build=(--no-build-isolation)
fi
need=()
"$vpy" -c "import numpy" >/dev/null 2>&1 || need+=(numpy)
"$vpy" -c "import pytest" >/dev/null 2>&1 || need+=(pytest)
if ((${#need[@]})); then
  log "pip install ${need[*]}"
  "$vpy" -m pip install -q "${need[@]}"
fi

log "pip install ./bindings/python (DDS_WITH_CUDA=${DDS_PY_WITH_CUDA:-OFF})"
t0=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL="${DDS_JOBS:-2}" "$vpy" -m pip install -q ${pip_build[@]+"${pip_build[@]}"} \
  --config-settings=cmake.define.DDS_WITH_CUDA="${DDS_PY_WITH_CUDA:-OFF}" \
  --config-settings=cmake.define.DDS_SOURCE_DIR="$root" \
  "$here"
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
exit "$rc"
