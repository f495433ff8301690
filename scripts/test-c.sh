#!/usr/bin/env bash
# Builds libdds with its tests and examples into ./build and runs every CTest test (labels cpu,
# gpu, example; with --emu also emu, the host emulation of the CUDA kernels, which
# scripts/test.sh runs as a stage of its own). GPU tests exit 77 without a device and are reported
# as skipped, not passed.
# Installs missing build dependencies first (Debian, as root). See scripts/common.sh for the
# environment variables (DDS_BUILD_DIR_NAME, DDS_WITH_CUDA, DDS_JOBS).
#   scripts/test-c.sh [--build-only | --test-only] [--emu]
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
cd "${DDS_ROOT}"

mode=all
labels=(-LE emu)
for arg in "$@"; do
  case "$arg" in
    --build-only | --test-only) mode="$arg" ;;
    --emu) labels=() ;;
    *) dds_die "usage: scripts/test-c.sh [--build-only | --test-only] [--emu]" ;;
  esac
done

dds_ensure_c_deps
if [[ "$mode" != --test-only ]]; then
  # shellcheck disable=SC2119
  dds_configure_build
fi
[[ "$mode" != --build-only ]] || exit 0

dds_log "ctest --test-dir ${DDS_BUILD} ${labels[*]:-(all labels)}"
log="${DDS_BUILD}/ctest.log"
rc=0
ctest --test-dir "${DDS_BUILD}" "${labels[@]}" --output-on-failure --no-tests=error -j "${DDS_JOBS}" \
  2>&1 | tee "$log" || rc=$?

passed="$(grep -cE 'Test +#[0-9]+: .* Passed' "$log" || true)"
skipped="$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "$log" || true)"
failed="$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run)' "$log" || true)"
echo
echo "C tests: ${passed} passed, ${skipped} skipped, ${failed} failed (log: ${log})"
if ((skipped > 0)); then
  grep -E 'Test +#[0-9]+: .*\*\*\*Skipped' "$log" | sed 's/^/  skipped: /'
fi
exit "$rc"
