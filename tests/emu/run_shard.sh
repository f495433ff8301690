#!/usr/bin/env bash
# Host emulation of the vocabulary-parallel CUDA kernels (kernels/shard/) against the CPU
# backend's records and outputs: the kernel headers as they are, run by their own launchers
# (kernels/shard/launch.cuh; tests/emu/include stands for the CUDA headers). Checks the kernels'
# logic only (not races, not speed, not the device libm).
# Usage: tests/emu/run_shard.sh <build dir with libdds.so> [emu_shard arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
source "$here/emu_build.sh"
emu_build shard "$build"
"$out/emu_shard" "${@:2}"
