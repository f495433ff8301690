#!/usr/bin/env bash
# Builds the Go GPU test binary HERE (the GPU machine has no Go toolchain):
#   .gpu-artifacts/go/dds-go-gpu.test   (not committed; copy .gpu-artifacts to the GPU machine)
# It holds every test of the package plus the CUDA ones (build tag cuda), links the static CUDA
# runtime from /usr/local/cuda/lib64 and libdds dynamically (any build of libdds.so.0 serves for
# linking, a CPU-only one too; the CUDA-enabled one is chosen at run time by gpu-test.sh).
# DDS_LIB_DIR: a libdds build directory (default build-go, built here if missing).
# (`go test -c` takes a single package in Go 1.19; all tests live in the root package.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
lib="${DDS_LIB_DIR:-$root/build-go}"
if [ ! -e "$lib/libdds.so" ]; then
  echo "prep-gpu.sh: building a CPU libdds in $lib (for linking only)"
  cmake -S "$root" -B "$lib" -G Ninja -DDDS_WITH_CUDA=OFF -DDDS_BUILD_TESTS=OFF \
    -DDDS_BUILD_EXAMPLES=OFF >/dev/null
  ninja -C "$lib" -j2 dds >/dev/null
fi
lib="$(cd "$lib" && pwd)"
out="$root/.gpu-artifacts/go"
mkdir -p "$out"
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=1
# No rpath: gpu-test.sh picks the library with LD_LIBRARY_PATH.
export CGO_LDFLAGS="-L$lib${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
cd "$here"
go vet -tags cuda ./...
go test -c -tags cuda -o "$out/dds-go-gpu.test" .
echo "prep-gpu.sh: built $out/dds-go-gpu.test ($(du -h "$out/dds-go-gpu.test" | cut -f1))"
echo "on the device, from the repo root: bindings/go/gpu-test.sh <CUDA libdds build dir>"
