#!/usr/bin/env bash
# Host emulation of kernels/stash.cuh (the CUDA dds_stash_logprobs kernel) against the CPU backend
# (tests/emu/cuda_emu*.h: a block's CUDA threads as fibers, blocks one after another). Checks the
# kernel's logic without a GPU (not races, not speed; exp2f stands for ex2.approx).
# Usage: tests/emu/run_stash.sh <build dir with libdds.so>             the sweep below
#        tests/emu/run_stash.sh <build dir> V n dtype variant [grid [requests]]   one case
#   The sweep runs v1, v2 and v2's mode 2 (DDS_STASH_V2=0 / 1 / 2; a DDS_STASH_V2 set by the
#   caller: that one); v2 also runs v1 on the same grid and reports whether the outputs are
#   byte-equal. The cases
#   with grid 40 have rows cut into several chunks (the partial-list merge), 200 requests take
#   v2's one-pass request scan over several warps, 600 the v1 scan both kernels keep beyond 256.
#   dtype 0 f32 / 1 bf16 / 2 f16; variant 0 top-n, 1 own ids, 2 logits mode, 3 committed tokens.
#   EMU_CASES (below): a list of cases instead of the sweep, with one build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
source "$here/emu_build.sh"
emu_build stash "$build"
if [ $# -gt 1 ]; then
  "$out/emu_stash" "${@:2}"
  exit $?
fi
rc=0
# EMU_CASES="case;case;..." (a case: [mode:]V n dtype variant [grid [requests]], mode = DDS_STASH_V2,
# default 0): those cases instead of the sweep (tests/emu/racecheck.sh).
if [ -n "${EMU_CASES:-}" ]; then
  IFS=';' read -ra cases <<<"$EMU_CASES"
  for c in "${cases[@]}"; do
    m=0; [[ "$c" == *:* ]] && { m=${c%%:*}; c=${c#*:}; }
    DDS_STASH_V2=$m "$out/emu_stash" $c | tail -1 || rc=1
  done
  echo "run_stash.sh: $([ $rc -eq 0 ] && echo 'all cases equal to the CPU' || echo 'MISMATCHES')"
  exit $rc
fi
# every mode (DDS_STASH_V2 unset / 0: v1, 1: v2, 2: v2 mode 2) unless DDS_STASH_V2 is set by the caller
for v2 in ${DDS_STASH_V2:-0 1 2}; do
  for c in "3000 5 0 0" "3000 20 1 1" "3000 5 2 2" "3000 20 0 3" "7 5 1 0" "1025 0 0 0" "5000 20 1 3 1" \
           "64 5 0 0 3 600" "70000 40 1 0" "3000 5 1 0 3 200" "32000 5 1 0 40" "32000 20 0 3 40" \
           "66000 32 2 1 40"; do
    set -- $c
    # mode 2 differs from v2 only in the 16-bit tile loads: its f32 kernel is v2's
    [ "$v2" = 2 ] && [ "$3" = 0 ] && continue
    DDS_STASH_V2=$v2 "$out/emu_stash" $c | tail -1 || rc=1
  done
done
echo "run_stash.sh: $([ $rc -eq 0 ] && echo 'all cases equal to the CPU' || echo 'MISMATCHES')"
exit $rc
