#!/usr/bin/env bash
# Host emulation of kernels/verify.cuh and kernels/reveal.cuh against the CPU backend (no GPU
# needed): a block's CUDA threads run as fibers on one host thread (tests/emu/cuda_emu.h; a
# std::thread each under ThreadSanitizer), __syncthreads and warp shuffles are barriers of the
# emulation. Block sizes are cut to 64 threads (2 warps for the per-block sums). Checks
# algorithmic parity only (not races, not speed).
# Usage: tests/emu/run.sh <build dir with libdds.so>   (not part of CTest)
#        tests/emu/run.sh <build dir> V R n [seed [per]]: only the decode_bench verify
#        configuration (R requests, n drafts, targets 2*N(0,1), drafts target + N(0,1), T = 1) vs
#        the CPU; scalar seed (shared uniforms), or with `per` seeds seed * R + r.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
out=$(mktemp -d)
for f in verify reveal; do
  sed -E 's/([a-z_]+)<<<([^,]+), ([^,]+), 0, stream>>>\((P|p)\);/EMU_LAUNCH(\1, \2, \3, \4);/' \
      "$root/kernels/$f.cuh" | sed 's/#include <cuda_runtime.h>/#include "cuda_emu.h"/' |
    sed 's/constexpr int kRowThreads = 512;/constexpr int kRowThreads = 64;/;
         s/constexpr int kBlockWarps = 8;/constexpr int kBlockWarps = 2;/;
         s/constexpr int kFinishThreads = 1024;/constexpr int kFinishThreads = 64;/;
         s/constexpr int kThreads = 512;/constexpr int kThreads = 64;/' > "$out/$f.h"
done
tests=(emu_verify emu_reveal); [ $# -gt 1 ] && tests=(emu_verify)
for t in "${tests[@]}"; do
  g++ -std=c++20 -O1 -pthread ${EMU_CXXFLAGS:-} -I"$out" -I"$here" -I"$root/include" -I"$root/kernels" "$here/$t.cpp" \
      -o "$out/$t" -L"$build" -ldds -Wl,-rpath,"$build"
  "$out/$t" "${@:2}"
done
