# shellcheck shell=bash
# Shared helpers of the scripts in scripts/gpu/ (sourced, not run).
#
# A BUILD argument is either a CMake build folder of a CUDA build (libdds.so.0 at its top, the
# programs under tests/ and bench/) or a flat folder holding libdds.so.0 and the programs side by
# side (what scripts/gpu/prep.sh writes to .gpu-artifacts/build). dds_gpu_bin finds a program in
# either layout; dds_gpu_use_build puts the folder's libdds first on LD_LIBRARY_PATH, so that a
# build copied from another machine loads its own library.

export DDS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

dds_gpu_die() { printf 'ERROR: %s\n' "$*" >&2; exit 2; }

# dds_gpu_abs_build DIR: absolute path of DIR on stdout; fails unless it holds a libdds.
dds_gpu_abs_build() {
  local d=$1
  [ -d "$d" ] || dds_gpu_die "$d: no such build folder"
  d=$(cd "$d" && pwd)
  [ -e "$d/libdds.so.0" ] || [ -e "$d/libdds.so" ] || dds_gpu_die "$d: no libdds.so.0 there"
  printf '%s\n' "$d"
}
# dds_gpu_use_build DIR: DIR first on LD_LIBRARY_PATH.
dds_gpu_use_build() {
  export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# dds_gpu_bin BUILD NAME: path of program NAME in BUILD (flat, tests/ or bench/), or nothing.
dds_gpu_bin() {
  local d
  for d in "$1" "$1/tests" "$1/bench"; do
    if [ -x "$d/$2" ] && [ -f "$d/$2" ]; then printf '%s\n' "$d/$2"; return 0; fi
  done
  return 1
}

# dds_gpu_tests BUILD: the GPU test programs (test_gpu_*, no extension) of BUILD, one per line.
dds_gpu_tests() {
  local d f
  for d in "$1" "$1/tests"; do
    for f in "$d"/test_gpu_*; do
      [ -x "$f" ] && [ -f "$f" ] && [[ "$(basename "$f")" != *.* ]] && printf '%s\n' "$f"
    done
  done
  return 0
}

# dds_gpu_name: "name, driver" of GPU 0.
dds_gpu_name() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
}

# Steps. dds_gpu_step NAME LIMIT_S CMD...: runs CMD (a bash command line) unless STEPS is set and
# does not name NAME, with a time limit, its output in $DDS_GPU_OUT/NAME.log and its tail on
# stdout; records "NAME rc seconds" for dds_gpu_summary. A failing step does not stop the others.
DDS_GPU_SUMMARY=()
DDS_GPU_FAILED=0
dds_gpu_step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then return 0; fi
  local t0=$SECONDS rc
  echo "=== [$name]"
  timeout "$limit" bash -c "$*" >"$DDS_GPU_OUT/$name.log" 2>&1
  rc=$?
  tail -n "${TAIL_LINES:-8}" "$DDS_GPU_OUT/$name.log"
  DDS_GPU_SUMMARY+=("$(printf '%-16s rc=%-4s %5ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" -eq 0 ] || DDS_GPU_FAILED=1
  return 0
}
dds_gpu_summary() {
  {
    echo "=== $1 ($(date -u +%F), ${DDS_GPU_NAME:-unknown GPU})"
    printf '%s\n' "${DDS_GPU_SUMMARY[@]}"
  } | tee "$DDS_GPU_OUT/summary.txt"
}
