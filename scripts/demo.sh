#!/usr/bin/env bash
# Builds libdds and the demo into ./build (installing missing build dependencies first: Debian,
# as root) and runs it: a small masked-diffusion decode loop over a synthetic model, on the CUDA
# backend when a GPU is usable, else on the CPU backend. Arguments are passed to the demo.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
cd "${DDS_ROOT}"

dds_ensure_c_deps
dds_configure_build --target dds_demo
dds_log "running ${DDS_BUILD}/examples/dds_demo"
exec "${DDS_BUILD}/examples/dds_demo" "$@"
