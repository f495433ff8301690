#!/usr/bin/env bash
# Prepares, on a machine with the CUDA toolkit (no GPU needed), everything the GPU scripts run, so
# that a GPU machine without compilers or network only runs programs:
#
#   scripts/gpu/prep.sh [BUILD_DIR]        (default build-gpu)
#
#   BUILD_DIR                 scripts/gpu/build.sh of the working tree, with libdds_nccl
#   .gpu-artifacts/build/     libdds, libdds_nccl, the GPU tests, the NCCL test and the benchmark
#                             programs, flat (the BUILD argument of check.sh, bench.sh, ab.sh)
#   .gpu-artifacts/rust, /go  the Rust and Go GPU test programs (bindings/*/prep-gpu.sh), when
#                             cargo / go are installed
#   bindings/python/_generated/  the SWIG wrapper (bindings/python/gen-wrapper.sh), when swig is
#
# All are git-ignored; copy them with the checkout to the GPU machine. For the peers of
# bench/peers/run.py, scripts/prep-peers.sh prepares .fi/ and .vllm/ the same way.
#
# DDS_PACK=1: .gpu-artifacts/build is also packed into .gpu-artifacts/build.tar.zst (zstd
# --long=31; unpack with `zstd -d --long=31 -c FILE | tar -x`), built with uncompressed fatbins
# (nvcc --no-compress). nvcc's own fatbin compression leaves about 50 MB per copy of the kernels
# that no archiver shrinks, and libdds.so, test_gpu_sample, test_gpu_mask and dds_profile_sample
# each hold a copy (the last three link the static dds_internal): about 215 MB, 54 MB packed.
# Uncompressed, the copies are 345-374 MB each, and the long-range matcher packs libdds.so with
# those three programs, the other GPU tests and dds_bench to about 32 MB (zstd -19, about 3.5
# minutes on 2 cores; -12 gives 41 MB in under a minute; libdds.so, dds_bench and
# dds_profile_sample alone pack to about 30 MB with -19).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$DDS_ROOT"
BUILD=${1:-build-gpu}
pack=()
[ "${DDS_PACK:-0}" = 1 ] && pack=(-DCMAKE_CUDA_FLAGS=--no-compress)
DDS_WITH_NCCL=${DDS_WITH_NCCL:-ON} scripts/gpu/build.sh . "$BUILD" "${pack[@]}"
art=.gpu-artifacts/build
rm -rf "$art" && mkdir -p "$art"
cp -a "$BUILD"/libdds.so* "$art"/
cp -a "$BUILD"/libdds_nccl.so* "$art"/ 2>/dev/null || echo "prep: no libdds_nccl (NCCL not found)"
for t in "$BUILD"/tests/test_gpu_* "$BUILD"/tests/test_nccl_shard "$BUILD"/bench/dds_*; do
  [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$art"/
done
strip --strip-debug "$art"/test_* 2>/dev/null || true
if command -v cargo >/dev/null; then DDS_LIB_DIR="$PWD/$BUILD" bash bindings/rust/prep-gpu.sh; fi
if command -v go >/dev/null; then DDS_LIB_DIR="$PWD/$BUILD" bash bindings/go/prep-gpu.sh; fi
if command -v swig >/dev/null; then bash bindings/python/gen-wrapper.sh; fi
if [ "${DDS_PACK:-0}" = 1 ]; then
  tar -C .gpu-artifacts -cf - build | zstd -q -T0 --long=31 -19 -o .gpu-artifacts/build.tar.zst -f
fi
du -sh .gpu-artifacts bindings/python/_generated 2>/dev/null || true
