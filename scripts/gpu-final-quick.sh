#!/usr/bin/env bash
# Shorter than gpu-final.sh (one device budget): the C GPU tests (test_gpu_verify without its
# 1e5-trial case), dds_bench --only sample / stash, memcheck and racecheck of the sample sanitizer
# case, the Python GPU suite, and (step ab) an A/B of dds_profile_sample shapes (AB_SHAPES, as
# scripts/ab-sample.sh takes them) between the libdds builds in AB_LIBS (directories; default
# .gpu-artifacts/base) and the new one. Logs under $OUT, a digest on stdout; STEPS="tests ab" runs
# those steps only. Carry .gpu-artifacts/build (scripts/prep-gpu-final.sh), the AB_LIBS
# directories and bindings/python/_generated.
B=$PWD/.gpu-artifacts/build; export B LD_LIBRARY_PATH=$B
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; export OUT
s() { local n=$1 l=$2; shift 2; [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $n "* ]] || return 0; local t0=$SECONDS; echo "=== [$n] $(date -u +%T)"; timeout $l bash -c "$*" > $OUT/$n.log 2>&1; local rc=$?; tail -n ${TL:-6} $OUT/$n.log; echo "--- [$n] rc=$rc $((SECONDS-t0)) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s tests 300 'set -o pipefail; rc=0; for t in test_gpu_sample test_gpu_shard test_gpu_reliability test_gpu_reveal test_gpu_stash; do echo "--- $t"; $B/$t | tail -3 || rc=1; done; echo "--- test_gpu_verify (without the 1e5-trial case)"; $B/test_gpu_verify -tce="*sequential*" | tail -3 || rc=1; exit $rc'
TL=3 s bench 230 "$B/dds_bench --only sample"
TL=3 s stash 70 "$B/dds_bench --only stash"
s memcheck 100 "set -o pipefail; compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_gpu_sample -tc='*sanitizer*' | tail -4"
s racecheck 150 "set -o pipefail; compute-sanitizer --tool racecheck --error-exitcode 3 $B/test_gpu_sample -tc='*sanitizer*' | tail -4"
TL=40 s ab 300 "KNOB=LIB VALUES='${AB_LIBS:-$PWD/.gpu-artifacts/base} $B' SHAPES='${AB_SHAPES:-f32 262144 4096 topp}' CALLS=${AB_CALLS:-15} bash scripts/ab-sample.sh"
s python 150 "DDS_PY_GPU_LOG=none DDS_PY_LIB=$B/libdds.so.0 bash bindings/python/gpu-test.sh"
