#!/usr/bin/env bash
# Host emulation of the CUDA dds_verify_drafts and dds_reveal kernels (kernels/verify/,
# kernels/reveal/) against the CPU backend: the kernel headers as they are, run by the library's
# launchers (tests/emu/include stands for the CUDA headers). Checks algorithmic parity (not
# races, not speed).
# Usage: tests/emu/run.sh <build dir with libdds.so>
#        tests/emu/run.sh <build dir> V R n [seed [per]]: only the decode_bench verify
#        configuration (R requests, n drafts, targets 2*N(0,1), drafts target + N(0,1), T = 1) vs
#        the CPU; scalar seed (shared uniforms), or with `per` seeds seed * R + r.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
source "$here/emu_build.sh"
tests=(verify reveal); [ $# -gt 1 ] && tests=(verify)
for t in "${tests[@]}"; do
  emu_build "$t" "$build"
  "$out/emu_$t" "${@:2}"
done
