#!/usr/bin/env bash
# Every Python GPU check in one command, run ON the GPU machine from the repository root:
#   bash bindings/python/gpu-all.sh OUT_DIR [WHEEL | build]
# 1. gpu-test.sh: install with the CUDA backend (pre-generated SWIG wrapper: run
#    bindings/python/gen-wrapper.sh where SWIG exists and copy bindings/python/_generated along),
#    pytest -m gpu (torch / CuPy parity, streams, CUDA graphs, tests/test_torch_compile.py's
#    torch.compile(mode="reduce-overhead", fullgraph=True)), the CPU suite (torch.compile on
#    CPU tensors included), the demo -> OUT_DIR/python-gpu.log;
# 2. bench/python_call_cost.py on the CUDA backend and on the CPU backend ->
#    OUT_DIR/python_call_cost_{cuda,cpu}.{txt,json};
# 3. with WHEEL (a wheel of scripts/build-wheel.sh --cuda, built elsewhere), or `build` (build
#    it here: scripts/build-wheel.sh --cuda --offline, nothing fetched, into build/dist; needs
#    bindings/python/_generated as step 1 does): test-wheel.sh --gpu (clean venv seeing the
#    system's torch and numpy, no index, the README quick start on the CPU, then the CUDA
#    backend against the CPU's tokens) -> OUT_DIR/wheel.log (the build's report included).
# Exit status: nonzero if any step fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: gpu-all.sh OUT_DIR [WHEEL]}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
py="${PYTHON:-python3}"
rc=0
OUT="$out" bash "$root/bindings/python/gpu-test.sh" || rc=1
cd /tmp
for b in cuda cpu; do
  "$py" "$root/bench/python_call_cost.py" --backend "$b" --json "$out/python_call_cost_$b.json" \
    2>&1 | tee "$out/python_call_cost_$b.txt"
  ((PIPESTATUS[0] == 0)) || rc=1
done
if [[ -n "${2:-}" ]]; then
  (
    set -eo pipefail
    whl="$2"
    if [[ "$whl" == build ]]; then
      t0=$SECONDS
      whl="$(bash "$root/scripts/build-wheel.sh" --cuda --offline -o "$root/build/dist" | tail -1)"
      echo "gpu-all.sh: CUDA wheel built in $((SECONDS - t0)) s ($(nproc) cores)"
    fi
    PIP_NO_INDEX=1 DDS_WHEEL_VENV_ARGS=--system-site-packages \
      bash "$root/bindings/python/test-wheel.sh" "$whl" --gpu
  ) 2>&1 | tee "$out/wheel.log"
  ((PIPESTATUS[0] == 0)) || rc=1
fi
echo "gpu-all.sh: exit $rc; results in $out"
exit "$rc"
