#!/usr/bin/env bash
# Host emulation of the CUDA dds_stash_logprobs kernel (kernels/stash/) against the CPU backend:
# the kernel headers as they are, run by the library's launcher with the CUDA backend's parameter
# block (tests/emu/include stands for the CUDA headers). Checks the kernel's logic without a GPU
# (not races, not speed; exp2f stands for ex2.approx).
# Usage: tests/emu/run_stash.sh <build dir with libdds.so>             the sweep below
#        tests/emu/run_stash.sh <build dir> V n dtype variant [sms [requests [K [mask [layout]]]]]
#   (K: the hostile row_offsets case K of tests/hostile_cases.h, -1 none; mask: allowed-token
#   masks, 1 dense, 2 sparse)
#   dtype 0 f32 / 1 bf16 / 2 f16; variant 0 top-n, 1 own ids, 2 logits mode, 3 committed tokens;
#   sms: the SM count given to the launcher (default 3; the emulation's occupancy is one CTA per
#   SM). The cases with 40 SMs have rows cut into several chunks (the partial-list merge), 200 and
#   600 requests take the kept-row prefix over several warps. mask: allowed-token masks
#   (1 dense, 2 sparse). layout: 1 one row per request without row_offsets (kept: 1 in 16 and
#   1 in 7), 2 the same with keep flags only (the benchmark's call); 4096 and 5000 requests take
#   the kept-row prefix in one and in two rounds.
#   EMU_CASES="case;case;..." (below): a list of cases instead of the sweep, with one build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); build=${1:?build dir}
source "$here/emu_build.sh"
emu_build stash "$build"
if [ $# -gt 1 ]; then
  "$out/emu_stash" "${@:2}"
  exit $?
fi
rc=0
if [ -n "${EMU_CASES:-}" ]; then
  IFS=';' read -ra cases <<<"$EMU_CASES"
else
  cases=("3000 5 0 0" "3000 20 1 1" "3000 5 2 2" "3000 20 0 3" "7 5 1 0" "1025 0 0 0"
         "5000 20 1 3 1" "64 5 0 0 3 600" "70000 40 1 0" "3000 5 1 0 3 200" "32000 5 1 0 40"
         "32000 20 0 3 40" "66000 32 2 1 40"
         "3000 5 0 0 3 10 0" "3000 5 1 3 3 10 1" "3000 5 0 1 3 10 2" "32000 20 1 0 40 10 3"
         "3000 5 0 0 3 10 -1 1" "3000 20 1 1 3 10 -1 2" "3000 5 2 2 3 10 -1 1" "3000 20 0 3 3 10 -1 2"
         "1025 5 1 3 3 10 -1 1" "32000 20 1 3 40 10 -1 1" "66000 32 2 1 40 10 -1 2"
         "64 5 0 0 3 5000" "3000 20 1 0 40 4096 -1 0 2" "1025 5 0 3 3 5000 -1 0 1"
         "64 20 2 1 3 300 -1 1 1")
fi
for c in "${cases[@]}"; do
  "$out/emu_stash" $c | tail -1 || rc=1
done
echo "run_stash.sh: $([ $rc -eq 0 ] && echo 'all cases equal to the CPU' || echo 'MISMATCHES')"
exit $rc
