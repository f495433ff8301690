#!/usr/bin/env bash
# Prepares, on a machine that reaches PyPI and has the CUDA toolkit (no GPU needed), the two
# ignored folders from which bench/peers/run.py loads the third-party peers on the GPU machine (no
# network there), from pinned PyPI releases, so that nothing of theirs is committed and nothing is
# compiled on the GPU machine:
#
#   .vllm/  vLLM's own files (from vllm wheels, nothing else of vLLM), one tree per release:
#           .vllm/<version>/vllm/v1/worker/gpu/sample/gumbel.py      model-runner-v2 Gumbel sampler
#           .vllm/<version>/vllm/v1/sample/ops/topk_topp_triton.py   Qrita top-k/top-p (default)
#           .vllm/<version>/vllm/model_executor/warmup/jit_warmup*.py   the launch dispatcher that
#                                                  newer releases run Qrita's kernels through
#           .vllm/<version>/vllm/model_executor/models/diffusion_gemma_sampler.py  DiffusionGemma's
#                                                  row statistics (Triton; 0.33.0 has it)
#           .vllm/<version>/vllm/v1/worker/gpu/sample/logprob.py   compute_topk_scores, what
#                                                  DiffusionGemma's logprob stash calls
#           .vllm/ORDER   the releases, newest first ($VLLM_VERSIONS). The newest is tried first;
#           the older one (the last release built for torch 2.11 / Triton 3.6, which the GPU
#           machine has) is the fallback if the newer kernels do not compile there.
#           No __init__.py files: bench/peers/vllm_peers.py supplies small stand-ins for the
#           configuration modules those files import (vllm.envs, vllm.platforms, ...).
#   .fi/    FlashInfer, stripped to what flashinfer.sampling needs:
#             flashinfer/           the Python files of the import closure of flashinfer.sampling
#                                   and flashinfer.topk (traced), with a minimal __init__.py
#             flashinfer/data/aot/{sampling,topk}/*.so   the two JIT modules, built here for sm_90a
#                                   (FlashInfer loads data/aot/NAME/NAME.so before trying nvcc)
#             site/tvm_ffi/         apache-tvm-ffi for CPython 3.12 (the GPU machine's Python)
#             VERSION
#
# Copy ".fi" (or the packed ".fi.tar.xz") and ".vllm" with the checkout to the GPU machine;
# bench/peers/run.py finds them by itself (it puts .fi and .fi/site on sys.path).
#
# Environment: PREP_PY   a Python with torch to run FlashInfer's build with (default: a venv made
#                        under $PEERS_CACHE with torch==$TORCH_VERSION from PyPI; CPU is enough)
#              PEERS_CACHE  downloads, unpacked wheels, build venv (default .peers-cache, ignored)
#              SKIP_FI=1 / SKIP_VLLM=1  prepare only the other folder
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VLLM_VERSIONS="0.33.0 0.26.0"
FI_VERSION=0.7.4
TVM_FFI_VERSION=0.1.15.post2
TORCH_VERSION=2.11.0
CACHE=$(mkdir -p "${PEERS_CACHE:-.peers-cache}" && cd "${PEERS_CACHE:-.peers-cache}" && pwd)
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)

dl() { python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$CACHE/wheels" "$1"; }

if [ "${SKIP_VLLM:-0}" != 1 ]; then
  rm -rf .vllm && mkdir -p .vllm
  for v in $VLLM_VERSIONS; do
    echo "=== .vllm/$v from vllm==$v"
    dl "vllm==$v"
    python3 - "$CACHE"/wheels/vllm-"$v"-*.whl ".vllm/$v" <<'EOF'
import sys, zipfile
whl, dest = sys.argv[1:]
want = ["vllm/v1/worker/gpu/sample/gumbel.py", "vllm/v1/sample/ops/topk_topp_triton.py",
        "vllm/model_executor/warmup/jit_warmup.py",
        "vllm/model_executor/warmup/jit_warmup_triton_helper.py",
        # DiffusionGemma's row-statistics kernel and the logprobs code its stash calls
        # (bench/peers/diffusion_gemma.py)
        "vllm/model_executor/models/diffusion_gemma_sampler.py",
        "vllm/v1/worker/gpu/sample/logprob.py"]
with zipfile.ZipFile(whl) as z:
    names = set(z.namelist())
    for m in want:
        if m in names:  # older releases have no warmup dispatcher
            z.extract(m, dest)
EOF
    echo "$v" > ".vllm/$v/VERSION"
    echo "$v" >> .vllm/ORDER
  done
fi

if [ "${SKIP_FI:-0}" != 1 ]; then
  echo "=== .fi from flashinfer-python==$FI_VERSION, apache-tvm-ffi==$TVM_FFI_VERSION"
  dl "flashinfer-python==$FI_VERSION"
  dl "apache-tvm-ffi==$TVM_FFI_VERSION"
  PY=${PREP_PY:-}
  if [ -z "$PY" ]; then
    if [ ! -x "$CACHE/venv/bin/python" ]; then
      python3 -m venv "$CACHE/venv"
      "$CACHE/venv/bin/pip" install -q "torch==$TORCH_VERSION" numpy
    fi
    PY=$CACHE/venv/bin/python
  fi
  # FlashInfer's build and import needs (the GPU machine has all of these but apache-tvm-ffi).
  "$PY" -m pip install -q "apache-tvm-ffi==$TVM_FFI_VERSION" filelock packaging ninja nvidia-ml-py
  SRC=$CACHE/flashinfer-$FI_VERSION
  if [ ! -d "$SRC/flashinfer/data/csrc" ]; then
    rm -rf "$SRC" && mkdir -p "$SRC"
    python3 -m zipfile -e "$CACHE"/wheels/flashinfer_python-"$FI_VERSION"-py3-none-any.whl "$SRC"
  fi
  # A minimal package initialiser: the full one imports every FlashInfer feature (and
  # nvidia-cutlass-dsl, cuda-tile, ... which the GPU machine does not have).
  cat > "$SRC/flashinfer/__init__.py" <<'EOF'
# Stripped for dds bench/peers (scripts/prep-peers.sh): only flashinfer.sampling and flashinfer.topk.
from .version import __version__ as __version__
EOF
  cat > "$SRC/flashinfer/jit/__init__.py" <<'EOF'
# Stripped for dds bench/peers (scripts/prep-peers.sh).
from . import env as env
from .core import JitSpec as JitSpec, gen_jit_spec as gen_jit_spec
EOF
  # Build the sampling and top-k modules for sm_90a, and list the import closure.
  FLASHINFER_WORKSPACE_BASE=$CACHE/fi-ws FLASHINFER_CUDA_ARCH_LIST=9.0 MAX_JOBS=${JOBS:-2} \
    "$PY" - "$SRC" "$CACHE/fi-files.txt" <<'EOF'
import os, sys, shutil
src, listing = sys.argv[1], sys.argv[2]
sys.path.insert(0, src)
import flashinfer.sampling  # noqa: F401
import flashinfer.topk  # noqa: F401
from flashinfer.jit.sampling import gen_sampling_module
from flashinfer.jit.topk import gen_topk_module
out = []
for spec in (gen_sampling_module(), gen_topk_module()):
    spec.build(verbose=False)
    out.append(f"so {spec.name} {spec.jit_library_path}")
for m, mod in sorted(sys.modules.items()):
    f = getattr(mod, "__file__", None)
    if (m == "flashinfer" or m.startswith("flashinfer.")) and f:
        out.append("py " + os.path.relpath(f, src))
open(listing, "w").write("\n".join(out) + "\n")
EOF
  rm -rf .fi && mkdir -p .fi/site
  while read -r kind a b; do
    if [ "$kind" = py ]; then
      mkdir -p ".fi/$(dirname "$a")" && cp "$SRC/$a" ".fi/$a"
    else
      mkdir -p ".fi/flashinfer/data/aot/$a" && cp "$b" ".fi/flashinfer/data/aot/$a/$a.so"
      strip --strip-unneeded ".fi/flashinfer/data/aot/$a/$a.so"
    fi
  done < "$CACHE/fi-files.txt"
  # FlashInfer's sources are Apache-2.0: keep its licence with the copy.
  cp "$SRC"/flashinfer_python-"$FI_VERSION".dist-info/licenses/LICENSE .fi/ 2>/dev/null \
    || find "$SRC"/flashinfer_python-"$FI_VERSION".dist-info -iname 'LICENSE*' -exec cp {} .fi/ \; || true
  python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target .fi/site \
    "$CACHE"/wheels/apache_tvm_ffi-"$TVM_FFI_VERSION"-cp312-*.whl
  rm -rf .fi/site/bin .fi/site/tvm_ffi/3rdparty .fi/site/tvm_ffi/src .fi/site/tvm_ffi/include \
    .fi/site/tvm_ffi/cmake .fi/site/tvm_ffi/share
  printf '%s (sampling + topk prebuilt for sm_90a, nvcc %s)\napache-tvm-ffi %s\n' \
    "$FI_VERSION" "$(nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2)" \
    "$TVM_FFI_VERSION" > .fi/VERSION
  # The same, packed (about half the size): copy .fi.tar.xz instead of .fi when room is short;
  # bench/peers/flashinfer_peers.py unpacks it when .fi/ is absent.
  tar -cf - .fi | xz -9 -T"${JOBS:-2}" > .fi.tar.xz
fi
du -sh .fi .fi.tar.xz .vllm 2>/dev/null || true
