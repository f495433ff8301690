#!/usr/bin/env bash
# The host emulations of the CUDA kernels that scripts/test.sh (CI) runs: dds_sample (quick set),
# dds_stash_logprobs, verify + reveal, vocabulary-parallel shard kernels, each against the CPU
# backend of the library in <build dir>, then the race check's quick set (racecheck.sh: the stash
# and sample kernels under ThreadSanitizer). Prints each part's time; exit status nonzero if any
# output differs or a shared-memory race is reported. Times on 2 cores: tests/emu/README.md.
# The long sweep of the dds_sample kernels is a separate command: tests/emu/run_sample.sh <build dir>.
# Usage: tests/emu/ci.sh <build dir with libdds.so>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); build=${1:?build dir}
rc=0
TIMEFORMAT='    (%R s wall, %U s user, %S s sys)'
echo "--- dds_sample kernels (run_sample.sh --quick)"
time { bash "$here/run_sample.sh" "$build" --quick || rc=1; }
echo "--- stash kernel (run_stash.sh)"
time { bash "$here/run_stash.sh" "$build" || rc=1; }
echo "--- verify and reveal kernels (run.sh)"
time { bash "$here/run.sh" "$build" | tail -3 || rc=1; }
echo "--- shard kernels (run_shard.sh)"
time { bash "$here/run_shard.sh" "$build" | tail -3 || rc=1; }
echo "--- race check: stash and sample kernels under ThreadSanitizer (racecheck.sh --quick)"
time { bash "$here/racecheck.sh" "$build" --quick || rc=1; }
echo "emulation: $([ $rc -eq 0 ] && echo 'all equal to the CPU backend' || echo FAILED)"
exit $rc
