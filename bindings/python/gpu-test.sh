#!/usr/bin/env bash
# GPU test of the Python binding, run ON the GPU machine from the repository root:
#   bash bindings/python/gpu-test.sh
# That machine has python3 with torch, CuPy, numpy, pytest, scikit-build-core, cmake, ninja and
# nvcc, but no SWIG and no internet: the SWIG wrapper must come pre-generated. Before the run,
# here (a machine with SWIG):  bindings/python/gen-wrapper.sh   and copy along
#   bindings/python/_generated        (ignored by git: dds_wrap.c + STAMP)
# Steps: pip install --no-build-isolation --no-deps ./bindings/python (CUDA backend ON, nothing
# fetched), pytest -m gpu (torch f32/bf16, CuPy, parity with the CPU backend, streams, CUDA graph
# replay), the CPU suite on the same build, and the demo on the GPU.
#
# Output: everything goes to stdout; with $OUT set, also to ONE file $OUT/python-gpu.log (set
# DDS_PY_GPU_LOG=none when this runs as a step of scripts/gpu/check.sh, whose step log already
# captures stdout). Full pip / junit logs stay in
# bindings/python/build/gpu-logs. Exit status: nonzero if the install, a test or the demo fails.
#
# Environment: DDS_SWIG_WRAPPER=/path/dds_wrap.c (instead of bindings/python/_generated),
# DDS_PY_LIB=/path/libdds.so.0 (package an already built CUDA libdds instead of building it),
# DDS_PY_WITH_CUDA (default ON), DDS_JOBS (default nproc), PYTHON (default python3),
# DDS_PY_INSTALL_ONLY=1 (install and stop: what scripts/gpu/check.sh's torch-nccl step uses).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
logs="$here/build/gpu-logs"
mkdir -p "$logs"
if [[ -n "${OUT:-}" && "${DDS_PY_GPU_LOG:-}" != none ]]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/python-gpu.log") 2>&1
fi
py="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1 PIP_BREAK_SYSTEM_PACKAGES=1
export PYTHONDONTWRITEBYTECODE=1
export DDS_REQUIRE_GPU="${DDS_REQUIRE_GPU:-1}"  # test_gpu.py: missing torch / CuPy / device fails
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
say() { printf '\n=== python gpu-test: %s\n' "$*"; }

say "environment"
date -u
git -C "$root" rev-parse HEAD 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
command -v nvcc >/dev/null && nvcc --version | tail -1
command -v swig || echo "swig: not found (pre-generated wrapper expected)"
cmake --version | head -1
"$py" - <<'PY'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for m in ("pip", "numpy", "pytest", "scikit_build_core", "torch", "cupy", "ml_dtypes"):
    try:
        mod = importlib.import_module(m)
        print(" ", m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(" ", m, "MISSING:", e)
try:
    import torch
    print("  torch cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception:
    pass
PY

wrapper="${DDS_SWIG_WRAPPER:-$here/_generated/dds_wrap.c}"
if ! command -v swig >/dev/null 2>&1 && [[ ! -f "$wrapper" ]]; then
  say "FAIL: no swig and no pre-generated wrapper at $wrapper (run bindings/python/gen-wrapper.sh where SWIG exists and copy bindings/python/_generated along)"
  exit 2
fi
[[ -f "$here/_generated/STAMP" ]] && { echo "wrapper stamp:"; cat "$here/_generated/STAMP"; }

lib_args=()
if [[ -n "${DDS_PY_LIB:-}" ]]; then
  # An already built CUDA libdds (e.g. build-gpu/libdds.so.0 of scripts/gpu/build.sh): packaged
  # as is, which saves compiling the kernels a second time.
  [[ -f "$DDS_PY_LIB" ]] || { say "FAIL: DDS_PY_LIB=$DDS_PY_LIB does not exist"; exit 2; }
  lib_args=(--config-settings=cmake.define.DDS_PREBUILT_LIB="$(cd "$(dirname "$DDS_PY_LIB")" && pwd)/$(basename "$DDS_PY_LIB")")
fi
say "pip install --no-build-isolation --no-deps ./bindings/python (${DDS_PY_LIB:+prebuilt $DDS_PY_LIB, }DDS_WITH_CUDA=${DDS_PY_WITH_CUDA:-ON})"
t0=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL="${DDS_JOBS:-$(nproc)}" "$py" -m pip install -v --no-build-isolation \
  --no-deps --force-reinstall \
  --config-settings=cmake.define.DDS_WITH_CUDA="${DDS_PY_WITH_CUDA:-ON}" \
  --config-settings=cmake.define.DDS_SOURCE_DIR="$root" ${lib_args[@]+"${lib_args[@]}"} \
  "$here" >"$logs/pip-install.log" 2>&1
rc=$?
grep -E "dds python:|dds [0-9.]+: CUDA backend|CMake Warning|Successfully" "$logs/pip-install.log"
if ((rc != 0)); then
  say "FAIL: pip install exited $rc after $((SECONDS - t0))s; last lines of the log:"
  tail -60 "$logs/pip-install.log"
  exit 1
fi
say "installed in $((SECONDS - t0))s"
if [[ "${DDS_PY_WITH_CUDA:-ON}" == ON ]] && ! (cd /tmp && "$py" -c 'import dds, sys; sys.exit(0 if dds.has_cuda() else 1)') 2>/dev/null; then
  say "FAIL: the installed dds has no CUDA backend (dds.has_cuda() is False)"
  exit 1
fi
(cd /tmp && "$py" -c 'import dds; print("dds", dds.__version__, dds.__file__, "has_cuda", dds.has_cuda())')
if [[ -n "${DDS_PY_INSTALL_ONLY:-}" ]]; then
  say "DDS_PY_INSTALL_ONLY: installed, no tests run"
  exit 0
fi

cd "$here"
say "pytest -m gpu"
t0=$SECONDS
"$py" -m pytest -p no:cacheprovider -m gpu -v -rs --durations=8 --junitxml="$logs/pytest-gpu.xml" tests
gpu_rc=$?
say "pytest -m gpu: exit $gpu_rc in $((SECONDS - t0))s"

say "pytest -m 'not gpu' (CPU backend, same build)"
"$py" -m pytest -p no:cacheprovider -m "not gpu" -q -rs tests 2>&1 | tail -15
cpu_rc=${PIPESTATUS[0]}

say "demo on the GPU"
(cd "$root" && timeout 300 "$py" examples/python/demo.py --backend cuda --steps 8)
demo_rc=$?

say "exit codes: pytest gpu $gpu_rc, pytest cpu $cpu_rc, demo $demo_rc"
if ((gpu_rc != 0 || cpu_rc != 0 || demo_rc != 0)); then
  exit 1
fi
exit 0
