#!/usr/bin/env bash
# GPU test of the Python binding, run ON the GPU machine from the repository root:
#   bash bindings/python/gpu-test.sh
# That machine has python3 with torch, CuPy, numpy, pytest, scikit-build-core, cmake, ninja and
# nvcc, but no SWIG and no internet: the SWIG wrapper must come pre-generated. Before the run,
# here (a machine with SWIG):  bindings/python/gen-wrapper.sh   and carry
#   bindings/python/_generated        (ignored by git: dds_wrap.c + STAMP)
# Steps: pip install --no-build-isolation --no-deps ./bindings/python (CUDA backend ON), then
# pytest -m gpu (torch f32/bf16, CuPy, parity with the CPU backend, streams, CUDA graphs), then
# the CPU suite, then the demo on the GPU. Logs go to $OUT when set (else
# bindings/python/build/gpu-logs): env.txt, pip-install.log, pytest-gpu.log, pytest-gpu.xml,
# pytest-cpu.log, demo-gpu.log. Exit status: nonzero if the install or a gpu test fails.
#
# Environment: DDS_SWIG_WRAPPER=/path/dds_wrap.c (instead of bindings/python/_generated),
# DDS_PY_WITH_CUDA (default ON), DDS_JOBS (default nproc), PYTHON (default python3).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
logs="${OUT:-$here/build/gpu-logs}"
mkdir -p "$logs"
py="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1 PIP_BREAK_SYSTEM_PACKAGES=1
export PYTHONDONTWRITEBYTECODE=1
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
say() { printf '\n=== gpu-test: %s\n' "$*" | tee -a "$logs/env.txt" >&2; }

: > "$logs/env.txt"
{
  date -u
  echo "root: $root"
  git -C "$root" rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  command -v nvcc && nvcc --version | tail -2
  command -v swig || echo "swig: not found (pre-generated wrapper expected)"
  cmake --version | head -1
  "$py" - <<'PY'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for m in ("numpy", "pytest", "scikit_build_core", "torch", "cupy", "ml_dtypes"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "MISSING:", e)
try:
    import torch
    print("torch cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception:
    pass
PY
} >>"$logs/env.txt" 2>&1

wrapper="${DDS_SWIG_WRAPPER:-$here/_generated/dds_wrap.c}"
if ! command -v swig >/dev/null 2>&1 && [[ ! -f "$wrapper" ]]; then
  say "FAIL: no swig and no pre-generated wrapper at $wrapper (run bindings/python/gen-wrapper.sh where SWIG exists and carry bindings/python/_generated)"
  exit 2
fi
[[ -f "$here/_generated/STAMP" ]] && cat "$here/_generated/STAMP" >>"$logs/env.txt"

say "pip install --no-build-isolation --no-deps ./bindings/python (DDS_WITH_CUDA=${DDS_PY_WITH_CUDA:-ON})"
t0=$SECONDS
CMAKE_BUILD_PARALLEL_LEVEL="${DDS_JOBS:-$(nproc)}" "$py" -m pip install -v --no-build-isolation \
  --no-deps --force-reinstall \
  --config-settings=cmake.define.DDS_WITH_CUDA="${DDS_PY_WITH_CUDA:-ON}" \
  --config-settings=cmake.define.DDS_SOURCE_DIR="$root" \
  "$here" >"$logs/pip-install.log" 2>&1
rc=$?
tail -5 "$logs/pip-install.log" >&2
if ((rc != 0)); then
  say "FAIL: pip install exited $rc after $((SECONDS - t0))s (see pip-install.log)"
  grep -nE "error|Error|FATAL|WARNING" "$logs/pip-install.log" | tail -30 >&2
  exit 1
fi
say "installed in $((SECONDS - t0))s"
(cd /tmp && "$py" -c 'import dds; print("dds", dds.__version__, dds.__file__, "has_cuda", dds.has_cuda())') \
  2>&1 | tee -a "$logs/env.txt"

cd "$here"
say "pytest -m gpu"
"$py" -m pytest -p no:cacheprovider -m gpu -v -rs --durations=10 \
  --junitxml="$logs/pytest-gpu.xml" tests >"$logs/pytest-gpu.log" 2>&1
gpu_rc=$?
tail -25 "$logs/pytest-gpu.log" >&2

say "pytest -m 'not gpu' (CPU backend, same build)"
"$py" -m pytest -p no:cacheprovider -m "not gpu" -q -rs tests >"$logs/pytest-cpu.log" 2>&1
cpu_rc=$?
tail -3 "$logs/pytest-cpu.log" >&2

say "demo on the GPU"
(cd "$root" && timeout 300 "$py" examples/python/demo.py --backend cuda --steps 8) \
  >"$logs/demo-gpu.log" 2>&1
demo_rc=$?
tail -12 "$logs/demo-gpu.log" >&2

say "exit codes: pytest gpu $gpu_rc, pytest cpu $cpu_rc, demo $demo_rc"
if ((gpu_rc != 0 || cpu_rc != 0 || demo_rc != 0)); then
  exit 1
fi
exit 0
