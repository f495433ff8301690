#!/usr/bin/env bash
# Installs a built wheel into a clean virtual environment on a PATH with no compiler, CMake or
# SWIG (only the venv's python and pip), and runs the README's quick start on the CPU backend
# (and, with --gpu, on the CUDA backend through torch, which must then be importable from the
# wheel's venv: pass --system-site-packages through DDS_WHEEL_VENV_ARGS).
#   bindings/python/test-wheel.sh WHEEL [--gpu]
# Without network: PIP_NO_INDEX=1 and DDS_WHEEL_VENV_ARGS=--system-site-packages (numpy, the
# wheel's one dependency, then comes from the system's site packages). With that flag the venv
# also sees the site packages of the Python that runs this script (PYTHON, default python3), when
# that Python is itself a venv (torch often lives in one). The wheel is installed into the venv
# even where that Python already has a dds, and the quick start checks that it imports the venv's.

set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
whl="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
gpu="${2:-}"
py="$(command -v "${PYTHON:-python3}")"
venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
# shellcheck disable=SC2086
"$py" -m venv ${DDS_WHEEL_VENV_ARGS:-} "$venv"
quick="$(dirname "$venv")/quickstart.py"
# The first ```python block under "## Quick start" of the README, as written there.
awk '/^## Quick start/ {q = 1} q && /^```python/ {p = 1; next} p && /^```/ {exit} p' \
  "$here/README.md" > "$quick"
cat >> "$quick" <<'PY'
assert r.tokens.shape == (6,) and r.confidence.shape == (6,) and r.logprobs is None
assert ((r.tokens >= 0) & (r.tokens < V)).all()
print("quick start on the CPU backend: tokens", r.tokens.tolist(), "dds", dds.__version__,
      "has_cuda", dds.has_cuda())
PY
if [[ " ${DDS_WHEEL_VENV_ARGS:-} " == *" --system-site-packages "* ]]; then
  # (the calling Python's own site packages, after the venv's: a venv's --system-site-packages
  # reaches only its base interpreter's)
  "$py" -c 'import site; print("\n".join(site.getsitepackages()))' \
    > "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_caller_site.pth"
fi
cat >> "$quick" <<'PY'
import os, sys
assert os.path.realpath(dds.__file__).startswith(os.path.realpath(sys.prefix) + os.sep), \
    f"dds imported from {dds.__file__}, not from the wheel's venv {sys.prefix}"
PY
# Only the venv on PATH: installing a wheel must need no compiler (--only-binary for numpy too);
# the wheel itself goes into the venv whatever the visible site packages hold.
pipi() {
  env -i HOME="${HOME:-/root}" PATH="$venv/bin" PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ${PIP_FIND_LINKS:+PIP_FIND_LINKS="$PIP_FIND_LINKS"} ${PIP_CERT:+PIP_CERT="$PIP_CERT"} \
    ${PIP_NO_INDEX:+PIP_NO_INDEX="$PIP_NO_INDEX"} \
    "$venv/bin/python" -m pip install -q --only-binary :all: "$@"
}
pipi numpy
pipi --ignore-installed --no-deps "$whl"
for tool in cc gcc c++ cmake swig nvcc; do
  if PATH="$venv/bin" command -v "$tool" >/dev/null 2>&1; then
    echo "test-wheel.sh: $tool is on the test PATH" >&2
    exit 1
  fi
done
(cd "$(dirname "$venv")" && env -i HOME="${HOME:-/root}" PATH="$venv/bin" "$venv/bin/python" "$quick")
if [[ "$gpu" == --gpu ]]; then
  (cd "$(dirname "$venv")" && env -i HOME="${HOME:-/root}" PATH="$venv/bin" "$venv/bin/python" - <<'PY'
import os, sys, torch, dds
assert os.path.realpath(dds.__file__).startswith(os.path.realpath(sys.prefix) + os.sep), dds.__file__
assert dds.has_cuda(), "the wheel has no CUDA backend"
V = 32000
x = torch.randn(6, V, device="cuda", dtype=torch.bfloat16)
with dds.Sampler(vocab_size=V, backend="cuda") as s, dds.Sampler(vocab_size=V) as c:
    r = s.sample(x, row_offsets=torch.tensor([0, 2, 6], dtype=torch.int32, device="cuda"),
                 temperature=0.8, seed=[17, 42], step=3, outputs=("tokens", "confidence"))
    ref = c.sample(x.cpu(), row_offsets=[0, 2, 6], temperature=0.8, seed=[17, 42], step=3)
    torch.cuda.synchronize()
    assert r.tokens.tolist() == ref.tokens.tolist(), "CUDA tokens differ from the CPU backend's"
    print("quick start on the CUDA backend:", r.tokens.tolist(), "cpu:", ref.tokens.tolist())
PY
  )
fi
echo "test-wheel.sh: $(basename "$whl") installed with no compiler and ran the quick start"
