#!/usr/bin/env bash
# CI for the Go binding (CPU backend). Called from scripts/test.sh with DDS_LIB_DIR (the directory
# holding libdds.so; defaults to DDS_BUILD_DIR) set, libdds already built there. Works as root on a
# fresh Debian: installs golang-go (and a C compiler, which cgo needs) when missing.
#   go vet ./...  (and with -tags cuda where the CUDA headers exist)
#   go test ./...,  the same with full cgo pointer checks (cgocheck=2),  go test -race ./...
#   (DDS_GO_RACE=0 skips the race run)
#   go run ./cmd/dds-demo
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

lib="${DDS_LIB_DIR:-${DDS_BUILD_DIR:-}}"
if [ -z "$lib" ]; then
  echo "bindings/go/test.sh: set DDS_LIB_DIR (or DDS_BUILD_DIR) to the directory holding libdds.so" >&2
  exit 2
fi
lib="$(cd "$lib" && pwd)"
if [ ! -e "$lib/libdds.so" ]; then
  echo "bindings/go/test.sh: no libdds.so in $lib (build libdds first)" >&2
  exit 2
fi

need_pkgs=()
command -v go >/dev/null 2>&1 || need_pkgs+=(golang-go)
command -v "${CC:-gcc}" >/dev/null 2>&1 || need_pkgs+=(gcc libc6-dev)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bindings/go/test.sh: installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  else
    echo "bindings/go/test.sh: missing ${need_pkgs[*]} (install Go >= 1.19 and a C compiler)" >&2
    exit 2
  fi
fi

# Caches under the build directory: works whatever HOME is, and leaves no trace elsewhere.
work="${DDS_BUILD_DIR:-$lib}/go"
mkdir -p "$work"
work="$(cd "$work" && pwd)" # Go wants absolute cache paths
export GOCACHE="${GOCACHE:-$work/cache}" GOPATH="${GOPATH:-$work/gopath}"
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS="${GOFLAGS:--buildvcs=false}" CGO_ENABLED=1
export CGO_LDFLAGS="-L$lib -Wl,-rpath,$lib${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

cd "$here"
go version
echo "== go vet ./..."
go vet ./...
if [ -e /usr/local/cuda/include/cuda_runtime_api.h ] && [ -e /usr/local/cuda/lib64/libcudart_static.a ]; then
  echo "== go vet -tags cuda ./..."
  go vet -tags cuda ./...
else
  echo "== go vet -tags cuda: skipped (no CUDA toolkit in /usr/local/cuda)"
fi
for f in sample_vectors.txt stash_vectors.txt; do
  [ -e "$root/tests/vectors/$f" ] || echo "NOTE: tests/vectors/$f is missing: the vector tests skip"
done
echo "== go test ./..."
go test -count=1 ./...
# Full cgo pointer checking (no Go pointer reaches C memory): GODEBUG=cgocheck=2 up to Go 1.20,
# GOEXPERIMENT=cgocheck2 from Go 1.21 (where the GODEBUG form aborts).
gominor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [[ "$gominor" =~ ^[0-9]+$ ]] && ((gominor >= 21)); then
  echo "== GOEXPERIMENT=cgocheck2 go test ."
  GOEXPERIMENT=cgocheck2 go test -count=1 .
else
  echo "== GODEBUG=cgocheck=2 go test ."
  GODEBUG=cgocheck=2 go test -count=1 .
fi
if [ "${DDS_GO_RACE:-1}" != 0 ]; then
  echo "== go test -race ./..."
  go test -race -count=1 ./...
fi
echo "== go run ./cmd/dds-demo"
go run ./cmd/dds-demo
echo "bindings/go/test.sh: OK"
