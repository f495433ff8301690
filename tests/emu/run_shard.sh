#!/usr/bin/env bash
# Host emulation of the vocabulary-parallel CUDA kernels (kernels/shard/, launched by
# src/cuda_shard.cu) against the CPU backend's records and outputs (tests/emu/cuda_emu.h: a
# std::thread per CUDA thread). Checks the kernels' logic only (not races, not speed, not the
# device libm). Not part of CTest.
# Usage: tests/emu/run_shard.sh <build dir with libdds.so>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
out=$(mktemp -d)
# The kernel headers (and src/cuda_shard.cu) as host C++: CUDA includes dropped, ex2.approx as
# exp2f, the f16 conversion as the host one, <<<>>> launches as emu_launch.
cp -r "$root/kernels" "$out/kernels"
emu_sed='s/^#include <cuda_fp16.h>//; s/^#include <cuda_runtime.h>//; s/^#include "cuda_internal.h"//;
         s/^#include "internal.h"//;
         s/asm\("ex2.approx.ftz.f32 %0, %1;" : "=f"\(y\) : "f"\(x\)\);/y = exp2f(x);/;
         s/__half2float\(__ushort_as_half\(h\)\)/dds::f16_to_f32(h)/;
         s/([A-Za-z_]+(<[A-Z0-9_]+>)?)<<<([^,]+), ([^,]+), 0, [^>]+>>>\(([^;]*)\);/EMU_LAUNCHV(\1, \3, \4, \5);/'
find "$out/kernels" -name '*.cuh' -o -name '*.h' | while read -r f; do sed -E -i "$emu_sed" "$f"; done
sed -E "$emu_sed" "$root/src/cuda_shard.cu" > "$out/cuda_shard_emu.h"
if grep -n '<<<' "$out/cuda_shard_emu.h" "$out"/kernels/shard/*; then echo "unconverted launch"; exit 1; fi
g++ -std=c++20 -O1 -pthread ${EMU_CXXFLAGS:-} -I"$out" -I"$out/kernels" -I"$here" -I"$root/include" -I"$root/src" \
    "$here/emu_shard.cpp" -o "$out/emu_shard" -L"$build" -ldds -Wl,-rpath,"$build"
"$out/emu_shard" "${@:2}"
