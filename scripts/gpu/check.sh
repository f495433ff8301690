#!/usr/bin/env bash
# The GPU correctness run: every GPU test, compute-sanitizer over them, the bindings' GPU tests
# and, with two GPUs or more, the NCCL and torch.distributed tests of vocabulary-parallel
# sampling. Run on the GPU machine from a checkout:
#
#   scripts/gpu/check.sh BUILD OUT_DIR
#
# BUILD: a CUDA build (scripts/gpu/build.sh) or the flat .gpu-artifacts/build of
# scripts/gpu/prep.sh. Each step writes OUT_DIR/<step>.log and prints its tail; OUT_DIR/summary.txt
# lists the steps with their exit status and time. Every step runs even when an earlier one
# failed; the exit status is non-zero if any did.
#
# Steps (STEPS="tests memcheck" runs those only):
#   tests       every test_gpu_* program
#   memcheck    compute-sanitizer memcheck, one run per test case (below)
#   racecheck   compute-sanitizer racecheck, likewise
#   initcheck   compute-sanitizer initcheck, likewise (only when named in STEPS)
#   python      bindings/python/gpu-test.sh (needs bindings/python/_generated)
#   rust, go    bindings/{rust,go}/gpu-test.sh (need .gpu-artifacts/rust, /go)
#   nccl        test_nccl_shard (>= 2 GPUs, libdds_nccl)
#   torch-nccl  tests/multigpu/torch_shard.py under torchrun (>= 2 GPUs)
#
# The sanitizers run each test case of a program separately (a whole program under racecheck
# can take longer than its limit), SANITIZE_TIMEOUT seconds each (default 300), SANITIZE_JOBS
# cases at once (default 4). test_gpu_sample runs only its "sanitizer" case (its parity sweeps
# are too large for the sanitizers' slowdown) and test_gpu_verify skips its 1e5-trial sequential
# case; SANITIZE_CASES / SANITIZE_EXCLUDE (doctest name filters) replace those choices for every
# program.
set -u -o pipefail
. "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || dds_gpu_die "usage: scripts/gpu/check.sh BUILD OUT_DIR"
B=$(dds_gpu_abs_build "$1")
mkdir -p "$2" && DDS_GPU_OUT=$(cd "$2" && pwd)
cd "$DDS_ROOT"
dds_gpu_use_build "$B"
export B DDS_GPU_OUT SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-300}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DDS_GPU_NAME=$(dds_gpu_name)
echo "$DDS_GPU_NAME"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
[ -n "${STEPS:-}" ] || STEPS="tests memcheck racecheck python rust go nccl torch-nccl"

run_tests() {
  local rc=0 t n=0
  for t in $(dds_gpu_tests "$B"); do
    echo "--- $t"
    n=$((n + 1))
    "$t" || rc=1
  done
  if [ "$n" -eq 0 ]; then
    echo "no test_gpu_* program in $B"
    return 1
  fi
  echo "$n test programs ran"
  return $rc
}
# Test cases of program $1 that the sanitizers run, one per line.
san_cases() {
  local name inc exc
  name=$(basename "$1")
  inc=${SANITIZE_CASES:-} exc=${SANITIZE_EXCLUDE:-}
  if [ -z "${SANITIZE_CASES:-}${SANITIZE_EXCLUDE:-}" ]; then
    case $name in
      test_gpu_sample) inc='*sanitizer*' ;;
      test_gpu_verify) exc='*sequential*' ;;
    esac
  fi
  "$1" --list-test-cases ${inc:+-tc="$inc"} ${exc:+-tce="$exc"} 2>/dev/null |
    sed -n '/^=\{5,\}$/,/^=\{5,\}$/p' | grep -v '^=\{5,\}$'
}
# sanitize TOOL: compute-sanitizer TOOL over every case san_cases lists, SANITIZE_JOBS cases at
# once (default 4: the cases' host work, the CPU oracles among it, overlaps; the GPU is shared),
# printed in program and case order when all have finished.
sanitize() {
  local tool=$1 rc=0 t c n i r
  local dir="$DDS_GPU_OUT/.san-$tool"
  rm -rf "$dir" && mkdir -p "$dir"
  for t in $(dds_gpu_tests "$B"); do
    while IFS= read -r c; do
      [ -n "$c" ] && printf '%s\t%s\n' "$t" "$c"
    done < <(san_cases "$t")
  done >"$dir/cases"
  n=$(wc -l <"$dir/cases")
  if [ "$n" -eq 0 ]; then
    echo "no test case of a test_gpu_* program in $B ran"
    rm -rf "$dir"
    return 1
  fi
  i=0
  while IFS=$'\t' read -r t c; do
    i=$((i + 1))
    while [ "$(jobs -rp | wc -l)" -ge "${SANITIZE_JOBS:-4}" ]; do wait -n; done
    # doctest filters: ',' separates names and is matched by '?' here.
    (timeout "$SANITIZE_TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$t" -tc="${c//,/?}" </dev/null >"$dir/$i.log" 2>&1
      echo $? >"$dir/$i.rc") &
  done <"$dir/cases"
  wait
  i=0
  while IFS=$'\t' read -r t c; do
    i=$((i + 1))
    r=$(cat "$dir/$i.rc" 2>/dev/null || echo missing)
    printf '%-5s %s : %s  %s\n' "rc=$r" "$(basename "$t")" "$c" \
      "$(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$dir/$i.log" | tr '\n' ' ')"
    [ "$r" = 0 ] || { rc=1; grep -E 'Error|error|hazard|Race reported' "$dir/$i.log" | sort | uniq -c | head -20; }
  done <"$dir/cases"
  rm -rf "$dir"
  return $rc
}
nccl_env() {
  # libdds_nccl needs libnccl.so.2: the CUDA toolkit's, else the nvidia-nccl wheel's.
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
    "$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)"; do
    if [ -n "$d" ] && [ -e "$d/libnccl.so.2" ]; then export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; return 0; fi
  done
  echo "libnccl.so.2 not found"
  return 1
}
torch_nccl() {
  DDS_PY_GPU_LOG=none DDS_PY_INSTALL_ONLY=1 DDS_PY_LIB="$B/libdds.so.0" bash bindings/python/gpu-test.sh | tail -3 || return 1
  (cd /tmp && python3 -m torch.distributed.run --standalone --nproc_per_node="$NGPU" "$DDS_ROOT/tests/multigpu/torch_shard.py")
}
export -f run_tests san_cases sanitize nccl_env torch_nccl dds_gpu_tests dds_gpu_bin
export NGPU DDS_ROOT

dds_gpu_step tests 900 run_tests
for tool in memcheck racecheck initcheck; do
  dds_gpu_step "$tool" 3600 sanitize "$tool"
done
dds_gpu_step python 300 "DDS_PY_GPU_LOG=none DDS_PY_LIB=$B/libdds.so.0 bash bindings/python/gpu-test.sh"
dds_gpu_step rust 120 "bash bindings/rust/gpu-test.sh $B"
dds_gpu_step go 120 "bash bindings/go/gpu-test.sh $B"
if [ "$NGPU" -ge 2 ]; then
  dds_gpu_step nccl 300 'nccl_env && "$(dds_gpu_bin "$B" test_nccl_shard)"'
  dds_gpu_step torch-nccl 300 torch_nccl
fi
dds_gpu_summary "scripts/gpu/check.sh $B"
exit $DDS_GPU_FAILED
