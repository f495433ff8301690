#!/usr/bin/env bash
# Builds libdds with the CUDA backend (sm_90), its GPU tests and the benchmark programs.
#
#   scripts/gpu/build.sh SOURCE BUILD_DIR [CMAKE_ARG...]
#
# SOURCE is a source tree (e.g. `.`) or a git revision of this repository (a commit, tag or
# branch): a revision is exported with `git archive` to BUILD_DIR.src and built from there, so
# that two revisions can be built side by side for scripts/gpu/ab.sh. Needs cmake, ninja and the
# CUDA toolkit; no GPU. doctest comes from the system (doctest-dev) or from the repository's
# .deps/include/doctest/.
#
# Environment: DDS_JOBS (build jobs, default nproc), DDS_WITH_NCCL=ON (also libdds_nccl, its test
# and dds_bench_nccl), DDS_BUILD_TESTS=OFF (libdds and the benchmarks only).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || dds_gpu_die "usage: scripts/gpu/build.sh SOURCE BUILD_DIR [CMAKE_ARG...]"
src=$1 build=$2
shift 2
if [ -f "$src/CMakeLists.txt" ]; then
  src=$(cd "$src" && pwd)
else
  rev=$(git -C "$DDS_ROOT" rev-parse --verify --quiet "$src^{commit}") ||
    dds_gpu_die "$src is neither a source tree nor a git revision"
  rm -rf "$build.src" && mkdir -p "$build.src"
  git -C "$DDS_ROOT" archive "$rev" | tar -x -C "$build.src"
  echo "$rev" >"$build.src/REVISION"
  src=$(cd "$build.src" && pwd)
fi
args=(-DCMAKE_BUILD_TYPE=Release -DDDS_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  -DDDS_BUILD_EXAMPLES=OFF -DDDS_BUILD_BENCH=ON -DDDS_BUILD_TESTS="${DDS_BUILD_TESTS:-ON}"
  -DDDS_WITH_NCCL="${DDS_WITH_NCCL:-OFF}")
[ -d "$DDS_ROOT/.deps/include/doctest" ] && args+=(-DDDS_DOCTEST_DIR="$DDS_ROOT/.deps/include")
cmake -S "$src" -B "$build" -G Ninja "${args[@]}" "$@" >/dev/null
ninja -C "$build" -j"${DDS_JOBS:-$(nproc)}"
