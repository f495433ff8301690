#!/usr/bin/env bash
# The reliability CI step (issue 11; called by scripts/test.sh, runnable on its own):
#   1. libdds + the CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (and
#      LeakSanitizer), -fno-sanitize-recover=all, in build-asan/: `ctest -L cpu`;
#   2. a ThreadSanitizer build in build-tsan/ running the concurrency test (test_rel_threads);
#   3. the libFuzzer targets (tests/fuzz/, clang -fsanitize=fuzzer,address,undefined) in
#      build-fuzz/: the checked-in corpus replayed, then each target fuzzed for
#      $DDS_FUZZ_SECONDS (default 60) from that corpus, as many at once as there are cores
#      (scripts/fuzz.sh).
# Any sanitizer report, test failure or fuzz finding fails the step (non-zero exit).
# Installs clang and libFuzzer (Debian: clang, libclang-rt-<N>-dev) when missing, as root.
#
# Environment: DDS_FUZZ_SECONDS (per target, default 60; 0 skips fuzzing but still replays the
# corpus), DDS_JOBS (build and test jobs, default 2), DDS_SAN_CC / DDS_SAN_CXX (compiler of
# step 1, default gcc / g++; clang / clang++ works too, in build-asan-clang/; step 2 always uses
# gcc), DDS_REL_STEPS (default "asan tsan fuzz").
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
cd "${DDS_ROOT}"

JOBS="${DDS_JOBS:-2}"
FUZZ_SECONDS="${DDS_FUZZ_SECONDS:-60}"
STEPS="${DDS_REL_STEPS:-asan tsan fuzz}"
SAN_CC="${DDS_SAN_CC:-gcc}"
SAN_CXX="${DDS_SAN_CXX:-g++}"
SFX="" # build folders per compiler (a CMake cache keeps its compiler)
[[ "$SAN_CXX" == *clang* ]] && SFX="-clang"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
t0=$SECONDS
results=()

dds_ensure_c_deps

# Configures BUILD_DIR with the sanitizer FLAGS for C, C++ and every link. libdds is a shared
# library linked with --no-undefined: gcc links the sanitizer runtime into it by itself; clang
# needs the shared runtime (-shared-libsan, found through an rpath).
configure_sanitized() {
  local dir="$1" flags="$2" link="$2"
  shift 2
  if "$SAN_CXX" --version 2>/dev/null | grep -qi clang; then
    local rt
    rt="$(dirname "$("$SAN_CXX" -print-file-name=libclang_rt.asan-x86_64.so)")"
    link="${flags} -shared-libsan -Wl,-rpath,${rt}"
  fi
  CC="$SAN_CC" CXX="$SAN_CXX" cmake -S . -B "$dir" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDS_WITH_CUDA=OFF -DDDS_BUILD_BENCH=OFF -DDDS_BUILD_EXAMPLES=OFF \
    "-DCMAKE_C_FLAGS=${flags}" "-DCMAKE_CXX_FLAGS=${flags}" \
    "-DCMAKE_EXE_LINKER_FLAGS=${link}" "-DCMAKE_SHARED_LINKER_FLAGS=${link}" "$@" >/dev/null
}

step_asan() {
  local t=$SECONDS dir="build-asan${SFX}"
  dds_log "reliability 1/3: ASan + UBSan + LSan build (${SAN_CXX}), ctest -L cpu in ${dir}"
  configure_sanitized "$dir" \
    "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  nice cmake --build "$dir" -j "$JOBS"
  # install_consumer builds and runs consumers of the installed library with plain flags (no
  # sanitizer runtime): it checks packaging, not memory, and cannot run against an ASan libdds.
  ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$dir" -L cpu -E '^install_consumer$' -j "$JOBS" --output-on-failure \
      --timeout 900
  results+=("ASan+UBSan+LSan ctest -L cpu: passed ($((SECONDS - t)) s)")
}

step_tsan() {
  # Always gcc: clang 14's shared TSan runtime (needed by a shared libdds) crashes at start-up
  # in libstdc++'s initialisers on Debian bookworm.
  local t=$SECONDS dir=build-tsan SAN_CC=gcc SAN_CXX=g++
  dds_log "reliability 2/3: ThreadSanitizer build (${SAN_CXX}), test_rel_threads in ${dir}"
  configure_sanitized "$dir" "-fsanitize=thread -fno-omit-frame-pointer"
  nice cmake --build "$dir" -j "$JOBS" --target test_rel_threads
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir "$dir" -R '^test_rel_threads$' --output-on-failure --timeout 900
  results+=("TSan test_rel_threads: passed ($((SECONDS - t)) s)")
}

# clang with libFuzzer: installed when missing (Debian: clang + libclang-rt-<major>-dev).
have_libfuzzer() {
  local tmp
  tmp="$(mktemp -d)"
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$tmp/f.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$tmp/f.cpp" -o "$tmp/f" >/dev/null 2>&1
  local rc=$?
  rm -rf "$tmp"
  return $rc
}
ensure_clang_libfuzzer() {
  command -v clang++ >/dev/null || dds_apt_install clang
  if ! have_libfuzzer; then
    local major
    major="$(clang++ --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)"
    dds_apt_install "libclang-rt-${major}-dev"
  fi
  have_libfuzzer || dds_die "clang++ cannot link -fsanitize=fuzzer (libFuzzer missing)"
}

step_fuzz() {
  local t=$SECONDS dir="${DDS_ROOT}/build-fuzz"
  dds_log "reliability 3/3: libFuzzer targets (clang, ASan + UBSan) in ${dir}, ${FUZZ_SECONDS} s each"
  ensure_clang_libfuzzer
  CC=clang CXX=clang++ cmake -S . -B "$dir" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDS_WITH_CUDA=OFF -DDDS_BUILD_BENCH=OFF -DDDS_BUILD_EXAMPLES=OFF -DDDS_BUILD_FUZZ=ON >/dev/null
  nice cmake --build "$dir" -j "$JOBS" --target fuzz_create fuzz_sample fuzz_stash
  # The checked-in corpus (seeds and regression inputs) first, as a plain regression test.
  ctest --test-dir "$dir" -L fuzz --output-on-failure
  if ((FUZZ_SECONDS > 0)); then
    # A fresh working corpus each CI run, so the run is the same on every machine.
    rm -rf "${dir}/corpus"
    DDS_FUZZ_BUILD_DIR="$dir" DDS_FUZZ_NO_BUILD=1 DDS_FUZZ_NICE=0 \
      bash "${DDS_ROOT}/scripts/fuzz.sh" "$FUZZ_SECONDS"
  fi
  results+=("fuzz (corpus replay + ${FUZZ_SECONDS} s per target): nothing found ($((SECONDS - t)) s)")
}

for s in $STEPS; do
  case "$s" in
    asan) step_asan ;;
    tsan) step_tsan ;;
    fuzz) step_fuzz ;;
    *) dds_die "unknown step '$s' in DDS_REL_STEPS" ;;
  esac
done

echo
echo "==================== dds reliability ===================="
printf '  %s\n' "${results[@]}"
echo "  total: $((SECONDS - t0)) s"
echo "RESULT: reliability step passed"
