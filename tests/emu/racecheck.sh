#!/usr/bin/env bash
# A race check of the CUDA kernels without a GPU: the host emulations (run_stash.sh,
# run_sample.sh, run.sh, run_shard.sh) built with ThreadSanitizer, where the emulation runs a
# std::thread per CUDA thread (tests/emu/cuda_emu_threads.h) instead of fibers.
# __syncthreads and __syncwarp order memory among the threads that take part; shuffles, ballots
# and match_any exchange values and order no memory (tests/emu/cuda_emu.h), so a shared-memory
# write and a read or write of the same word by another thread with no barrier between them is
# reported, like compute-sanitizer racecheck's shared-memory (and warp-level) hazards; it first
# runs its own test (emu_racecheck_selftest.cpp: four patterns, racy and correct). Races on
# global memory are counted, not failed (tsan_digest.py says why).
# A race is reported when two accesses are unordered by the emulation's barriers, whatever the
# timing of the run, but only on paths the cases take. The outputs are checked against the CPU
# backend as in the plain emulations.
# Usage: tests/emu/racecheck.sh <build dir with libdds.so> [--quick]
#   --quick (CI; 1.5 min on 2 cores when they are idle, 5 min when busy): a few cases of the
#   stash and sample kernels, chosen to take
#   the shared-memory code paths (partial-list merges, 16-bit tiles, the CTA forms of the small
#   kernels, the candidate finish, the filter kernel's selections);
#   default: every stash case, run_sample.sh --quick (these two 13.5 min here), verify + reveal
#   (~3.5 min), shard --quick (not yet timed under ThreadSanitizer).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); build=${1:?build dir}
logs=$(mktemp -d)
export EMU_CXXFLAGS="-fsanitize=thread -g -Wno-tsan"
export TSAN_OPTIONS="exitcode=0 log_path=$logs/tsan ${TSAN_OPTIONS:-}"
rc=0
# The check's own test first: each racy form of emu_racecheck_selftest.cpp must be reported, each
# correct form must not be (and must compute its value).
g++ -std=c++20 -O1 -pthread $EMU_CXXFLAGS -I"$here" -I"$here/../../kernels" -I"$here/../../include" \
    "$here/emu_racecheck_selftest.cpp" -o "$logs/selftest"
for p in shfl ballot warps divergent; do
  for r in 1 0; do
    d=$(mktemp -d)
    TSAN_OPTIONS="exitcode=0 log_path=$d/tsan" "$logs/selftest" $p $r > /dev/null || rc=1
    found=0; python3 "$here/tsan_digest.py" "$d" > /dev/null || found=1
    rm -rf "$d"
    if [ $found != $r ]; then
      echo "racecheck self-test FAILED: pattern $p racy=$r: hazard reported=$found"; rc=1
    fi
  done
done
echo "racecheck self-test: $([ $rc -eq 0 ] && echo '4 racy patterns reported, 4 correct ones clean' || echo FAILED)"
if [ "${2:-}" = --quick ]; then
  EMU_CASES="32000 5 1 0 40;66000 32 2 1 40;3000 20 1 1" \
    bash "$here/run_stash.sh" "$build" || rc=1
  EMU_CASES="1025 40 1 1 1 default;5000 40 1 0 1 default;40000 22 0 0 1 smem_row=0,split=0" \
    bash "$here/run_sample.sh" "$build" || rc=1
else
  bash "$here/run_stash.sh" "$build" || rc=1
  bash "$here/run_sample.sh" "$build" --quick || rc=1
  bash "$here/run.sh" "$build" | tail -3 || rc=1
  bash "$here/run_shard.sh" "$build" --quick | tail -3 || rc=1
fi
python3 "$here/tsan_digest.py" "$logs" || rc=1
rm -rf "$logs"
exit $rc
