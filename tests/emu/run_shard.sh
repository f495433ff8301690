#!/usr/bin/env bash
# Host emulation of src/cuda_shard.cu (the vocabulary-parallel CUDA kernels) against the CPU
# backend's records and outputs (tests/emu/cuda_emu.h: a block's CUDA threads as fibers). Checks the
# kernels' logic only (not races, not speed, not the device libm). Not part of CTest.
# Usage: tests/emu/run_shard.sh <build dir with libdds.so>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
out=$(mktemp -d)
sed -E 's/^#include <cuda_fp16.h>//; s/^#include <cuda_runtime.h>//; s/^#include "cuda_internal.h"//;
        s/^#include "internal.h"//;
        s/asm\("ex2.approx.ftz.f32 %0, %1;" : "=f"\(y\) : "f"\(x\)\);/y = exp2f(x);/;
        s/__half2float\(__ushort_as_half\(h\)\)/dds::f16_to_f32(h)/;
        s/([A-Za-z_]+(<[A-Z0-9_]+>)?)<<<([^,]+), ([^,]+), 0, [^>]+>>>\(([^;]*)\);/EMU_LAUNCHV(\1, \3, \4, \5);/' \
    "$root/src/cuda_shard.cu" > "$out/cuda_shard_emu.h"
if grep -q '<<<' "$out/cuda_shard_emu.h"; then echo "unconverted launch:"; grep -n '<<<' "$out/cuda_shard_emu.h"; exit 1; fi
g++ -std=c++20 -O1 -pthread ${EMU_CXXFLAGS:-} -I"$out" -I"$here" -I"$root/include" -I"$root/kernels" -I"$root/src" \
    "$here/emu_shard.cpp" -o "$out/emu_shard" -L"$build" -ldds -Wl,-rpath,"$build"
"$out/emu_shard" "${@:2}"
