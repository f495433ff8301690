#!/usr/bin/env bash
# Prepares, on a machine with the CUDA toolkit, SWIG, cargo and go (this one), what
# scripts/gpu-final.sh needs on the GPU machine, so that no device time is spent compiling:
#   .gpu-artifacts/build/          libdds + libdds_nccl (CUDA, sm_90), tests/gpu binaries, the NCCL
#                                  test, the benchmarks (dds_bench, dds_bench_shard, dds_bench_nccl,
#                                  dds_profile_sample), from build-final
#   .gpu-artifacts/rust, /go       the Rust and Go GPU test binaries
#   bindings/python/_generated/    the SWIG wrapper
# Then call the device with carry: [".gpu-artifacts", "bindings/python/_generated", ".deps", ".vllm"]
# and command: bash scripts/gpu-final.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-final}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DDDS_DOCTEST_DIR="$PWD/.deps/include" -DDDS_BUILD_EXAMPLES=OFF -DDDS_WITH_NCCL=ON >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}"
rm -rf .gpu-artifacts/build && mkdir -p .gpu-artifacts/build
cp -a "$BUILD"/libdds.so* .gpu-artifacts/build/
cp -a "$BUILD"/libdds_nccl.so* .gpu-artifacts/build/
for t in "$BUILD"/tests/test_gpu_* "$BUILD"/tests/test_nccl_shard "$BUILD"/bench/dds_bench \
  "$BUILD"/bench/dds_bench_shard "$BUILD"/bench/dds_bench_nccl "$BUILD"/bench/dds_profile_sample "$BUILD"/bench/dds_profile_stash; do
  if [ -e "$t" ]; then cp "$t" .gpu-artifacts/build/; else echo "prep: missing $t"; fi
done
strip --strip-debug .gpu-artifacts/build/test_* 2>/dev/null || true
DDS_LIB_DIR="$PWD/$BUILD" bash bindings/rust/prep-gpu.sh
DDS_LIB_DIR="$PWD/$BUILD" bash bindings/go/prep-gpu.sh
bash bindings/python/gen-wrapper.sh
du -sh .gpu-artifacts bindings/python/_generated .deps .vllm
