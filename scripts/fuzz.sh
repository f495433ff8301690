#!/usr/bin/env bash
# Runs the dds libFuzzer targets (tests/fuzz/) for a given time each, as many at once as the
# machine has cores (each target is one process on one core, so its time buys the same number of
# executions either way; 3 targets on 2 cores take two rounds).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60 s; fuzz_create fuzz_sample
#                                                          fuzz_stash)
#
# Builds them first (clang, -fsanitize=fuzzer,address,undefined) in $DDS_FUZZ_BUILD_DIR (default
# ./build-fuzz). Each target starts from its checked-in corpus tests/fuzz/corpus/<target>/ (read
# only: new inputs go to $DDS_FUZZ_BUILD_DIR/corpus/<target>/, crashes to
# $DDS_FUZZ_BUILD_DIR/artifacts/). Prints each target's execution count; exits non-zero if any
# target found something (a sanitizer report, a contract violation, a leak, a timeout or OOM).
#
# Environment: DDS_FUZZ_BUILD_DIR, DDS_JOBS (build jobs, default 2), DDS_FUZZ_FLAGS (extra
# libFuzzer flags), DDS_FUZZ_NICE (nice level, default 10), DDS_FUZZ_NO_BUILD=1 (use the build),
# DDS_FUZZ_PARALLEL (targets at once, default nproc).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER="${1:-${DDS_FUZZ_SECONDS:-60}}"
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(fuzz_create fuzz_sample fuzz_stash)
BUILD="${DDS_FUZZ_BUILD_DIR:-${ROOT}/build-fuzz}"
JOBS="${DDS_JOBS:-2}"
NICE=(nice -n "${DDS_FUZZ_NICE:-10}")

if [[ "${DDS_FUZZ_NO_BUILD:-0}" != 1 ]]; then
  command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  if [[ ! -f "${BUILD}/CMakeCache.txt" ]]; then
    CC=clang CXX=clang++ cmake -S "${ROOT}" -B "${BUILD}" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DDDS_WITH_CUDA=OFF -DDDS_BUILD_EXAMPLES=OFF -DDDS_BUILD_BENCH=OFF -DDDS_BUILD_FUZZ=ON >/dev/null
  fi
  "${NICE[@]}" cmake --build "${BUILD}" -j "${JOBS}" --target "${TARGETS[@]}"
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "${BUILD}/artifacts"
PARALLEL="${DDS_FUZZ_PARALLEL:-$(nproc)}"
((PARALLEL >= 1)) || PARALLEL=1
for t in "${TARGETS[@]}"; do
  [[ -x "${BUILD}/tests/fuzz/${t}" ]] || { echo "fuzz.sh: ${BUILD}/tests/fuzz/${t} not built" >&2; exit 2; }
done

# fuzz_one TARGET: runs it from its corpora; its exit status goes to ${BUILD}/TARGET.rc.
fuzz_one() {
  local t="$1" rc=0
  local work="${BUILD}/corpus/${t}"
  mkdir -p "$work"
  # shellcheck disable=SC2086
  "${NICE[@]}" "${BUILD}/tests/fuzz/${t}" -max_total_time="${SECONDS_PER}" -timeout=20 \
    -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 -artifact_prefix="${BUILD}/artifacts/${t}-" \
    ${DDS_FUZZ_FLAGS:-} "$work" "${ROOT}/tests/fuzz/corpus/${t}" >"${BUILD}/${t}.log" 2>&1 || rc=$?
  echo "$rc" >"${BUILD}/${t}.rc"
}
for t in "${TARGETS[@]}"; do
  while (($(jobs -rp | wc -l) >= PARALLEL)); do wait -n || true; done
  rm -f "${BUILD}/${t}.rc"
  echo "=== ${t}: ${SECONDS_PER} s (log: ${BUILD}/${t}.log)"
  fuzz_one "$t" &
done
wait

failed=()
summary=()
for t in "${TARGETS[@]}"; do
  log="${BUILD}/${t}.log"
  rc="$(cat "${BUILD}/${t}.rc" 2>/dev/null || echo missing)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)"
  if [[ "$rc" != 0 ]]; then
    failed+=("$t")
    summary+=("${t}: FAILED (exit ${rc}) after ${runs:-?} executions")
    echo "--- ${t} found something:"
    grep -E 'contract violation|ERROR:|SUMMARY:|runtime error|Test unit written' "$log" | head -20 || true
  else
    summary+=("${t}: ${runs:-?} executions, nothing found  [${done_line}]")
  fi
done
echo
echo "==================== dds fuzz summary ===================="
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "RESULT: FAILED (${failed[*]}); inputs in ${BUILD}/artifacts/"
  exit 1
fi
echo "RESULT: nothing found"
