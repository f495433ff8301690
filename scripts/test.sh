#!/usr/bin/env bash
# Builds and runs every test of dds: the C library (CTest: cpu, gpu and example labels; GPU tests
# are skipped without a device), the host emulation of the CUDA kernels, then the Python,
# Rust and Go bindings and the reliability suite,
# against the library built in ./build. Installs whatever is missing first (Debian, as root).
# Every stage runs even if an earlier binding stage failed; a summary is printed at the end and
# the exit status is nonzero if any stage failed or is missing. This is what CI runs (.ci/run).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
cd "${DDS_ROOT}"

STAGE_TIMEOUT="${DDS_STAGE_TIMEOUT:-1200}" # seconds per stage (the longest, the C build with nvcc present, takes ~460 s on 2 cores)
t_start=$SECONDS
stage_names=()
stage_results=()
stage_secs=()

# run_stage NAME CMD...: runs one stage, records PASS / FAIL and its duration.
run_stage() {
  local name="$1" t0=$SECONDS rc=0
  shift
  dds_log "stage: ${name}"
  timeout --foreground "${STAGE_TIMEOUT}" "$@" || rc=$?
  stage_names+=("$name")
  stage_secs+=($((SECONDS - t0)))
  if ((rc == 0)); then
    stage_results+=(PASS)
  elif ((rc == 124)); then
    stage_results+=("FAIL (timed out after ${STAGE_TIMEOUT}s)")
  else
    stage_results+=("FAIL (exit ${rc})")
  fi
  return "$rc"
}

summary() {
  local i bad=0
  echo
  echo "==================== dds test summary ===================="
  for i in "${!stage_names[@]}"; do
    printf '  %-32s %-44s %5ss\n' "${stage_names[$i]}" "${stage_results[$i]}" "${stage_secs[$i]}"
    [[ "${stage_results[$i]}" == PASS ]] || bad=1
  done
  if [[ -f "${DDS_BUILD}/ctest.log" ]]; then
    echo "  C tests: $(grep -cE 'Test +#[0-9]+: .* Passed' "${DDS_BUILD}/ctest.log" || true) passed," \
      "$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "${DDS_BUILD}/ctest.log" || true) skipped"
  fi
  echo "  total: $((SECONDS - t_start))s"
  if ((bad)); then
    echo "RESULT: FAILED"
  else
    echo "RESULT: all passed"
  fi
  echo "=========================================================="
  return "$bad"
}

dds_ensure_c_deps
dds_ensure_binding_deps

# The bindings need the library: if it does not build there is nothing more to run.
if ! run_stage "C build (scripts/test-c.sh)" bash scripts/test-c.sh --build-only; then
  summary || true
  exit 1
fi
run_stage "C tests (ctest -LE emu)" bash scripts/test-c.sh --test-only || true
# The CUDA kernels compiled for the host and run against the CPU backend (CTest label emu,
# tests/emu/README.md): their logic is checked on every run, GPU or not.
run_stage "CUDA kernels, host emulation" ctest --test-dir "${DDS_BUILD}" -L emu --output-on-failure \
  --no-tests=error -j "${DDS_JOBS}" || true

export DDS_BUILD_DIR="${DDS_BUILD}"
export DDS_LIB_DIR="${DDS_BUILD}"
for script in bindings/python/test.sh bindings/rust/test.sh bindings/go/test.sh \
    scripts/ci-reliability.sh; do
  if [[ ! -f "$script" ]]; then
    printf '\nERROR: missing %s (every stage must exist; nothing is skipped)\n' "$script" >&2
    stage_names+=("$script")
    stage_results+=("FAIL (missing ${script})")
    stage_secs+=(0)
    continue
  fi
  run_stage "$script" bash "$script" || true
done

summary
