#!/usr/bin/env bash
# One device run that checks everything GPU-side: the C GPU tests, compute-sanitizer memcheck on
# the smaller GPU tests, the Python, Rust and Go GPU tests, and the benchmarks against the peers
# (bench/peers) and of dds_reveal. Run ON the GPU machine from the repository root.
#
# Prepared here (no device time spent compiling):
#   scripts/prep-gpu-final.sh   # builds .gpu-artifacts/build (libdds + gpu tests, sm_90),
#                               # the Rust and Go GPU test binaries, the Python SWIG wrapper
# and the call carries .gpu-artifacts, bindings/python/_generated, .deps and .vllm.
# If the prebuilt binaries do not run there, it builds with cmake/ninja instead.
#
# GPU_FINAL_STEPS="bindings peers" runs only those steps; PEERS_BUDGET / PEERS_TIMEOUT (seconds).
# Output ($OUT, at most 8 files): summary.txt, logs.tar (one <step>.log per step, appended as each
# step ends, so a run cut short still brings back the finished steps), results.tar
# (docs/benchmarks). Steps: c-gpu, multigpu (NCCL test, >= 2 GPUs), bench-nccl, torch-multigpu
# (tests/multigpu/torch_shard.py under torchrun, >= 2 GPUs), python, bindings,
# bench (dds_bench: sample + stash), bench-shard, peers, decode, memcheck, ncu.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
LOGS=${LOGS:-$PWD/gpu-logs}
mkdir -p "$OUT" "$LOGS"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
B=$PWD/.gpu-artifacts/build
declare -a SUMMARY=()
FAILED=0
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${GPU_FINAL_STEPS:-}" ] && [[ " $GPU_FINAL_STEPS " != *" $name "* ]]; then return 0; fi
  local t0=$SECONDS
  echo "=== [$name] $(date -u +%T)"
  timeout "$limit" bash -c "$*" >"$LOGS/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL_LINES:-40}" "$LOGS/$name.log"
  tar -rf "$OUT/logs.tar" -C "$LOGS" "$name.log"
  SUMMARY+=("$(printf '%-10s rc=%-4s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" -eq 0 ] || FAILED=1
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export B OUT
if ! "$B/test_gpu_reveal" --list-test-cases >/dev/null 2>&1; then
  echo "prebuilt binaries do not run here: building"
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDDS_DOCTEST_DIR="$PWD/.deps/include" -DDDS_BUILD_EXAMPLES=OFF >/dev/null &&
    ninja -C build-gpu >/dev/null || exit 1
  mkdir -p "$B" && cp -a build-gpu/libdds.so* build-gpu/tests/test_gpu_* "$B"/
fi

c_gpu() {
  local rc=0
  for t in "$B"/test_gpu_*; do
    echo "--- $t"
    "$t" || rc=1
  done
  return $rc
}
memcheck() {
  local rc=0
  echo "--- memcheck test_gpu_sample (sanitizer case)"
  compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_sample" -tc='*sanitizer*' || rc=1
  for t in test_gpu_reveal test_gpu_stash test_gpu_reliability; do
    echo "--- memcheck $t"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$B/$t" || rc=1
  done
  echo "--- memcheck test_gpu_verify (without the 1e5-trial case)"
  compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_gpu_verify" -tce='*sequential*' || rc=1
  return $rc
}
python_gpu() {
  DDS_PY_GPU_LOG=none DDS_PY_LIB="$B/libdds.so.0" bash bindings/python/gpu-test.sh
}
bindings() {
  local rc=0
  echo "--- rust"
  bash bindings/rust/gpu-test.sh "$B" || rc=1
  echo "--- go"
  bash bindings/go/gpu-test.sh "$B" || rc=1
  return $rc
}
nccl_env() {
  # libdds_nccl needs libnccl.so.2: the CUDA toolkit's, else the nvidia-nccl wheel's.
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
    "$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)"; do
    if [ -n "$d" ] && [ -e "$d/libnccl.so.2" ]; then export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; echo "libnccl: $d"; return 0; fi
  done
  echo "libnccl.so.2 not found"; return 1
}
multigpu() { nccl_env && nvidia-smi topo -m; "$B/test_nccl_shard"; }
bench_nccl() { nccl_env && "$B/dds_bench_nccl"; }
torch_multigpu() {
  # tests/multigpu/torch_shard.py under torchrun, one process per GPU (torch's own NCCL).
  set -o pipefail
  DDS_PY_GPU_LOG=none DDS_PY_INSTALL_ONLY=1 DDS_PY_LIB="$B/libdds.so.0" bash bindings/python/gpu-test.sh |
    tail -3 || return 1
  local n script=$PWD/tests/multigpu/torch_shard.py; n=$(nvidia-smi -L | wc -l)
  (cd /tmp && python3 -m torch.distributed.run --standalone --nproc_per_node="$n" "$script")
}
bench_all() { "$B/dds_bench" ${BENCH_ARGS:-}; }
bench_shard() { "$B/dds_bench_shard"; }
ncu_plain() {
  # NCU_ARGS: dds_profile_sample's arguments (dtype V rows scenario calls); NCU_KERNEL: which
  # kernel (regex), its 3rd launch.
  "$B/dds_profile_sample" ${NCU_ARGS:-bf16 262144 4096 plain 5}
  ncu --clock-control none --kernel-name "regex:${NCU_KERNEL:-row_pass}" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section SourceCounters "$B/dds_profile_sample" ${NCU_ARGS:-bf16 262144 4096 plain 5}
}
peers() { DDS_LIB="$B/libdds.so" python3 bench/peers/run.py --budget "${PEERS_BUDGET:-120}"; }
decode() { DDS_LIB="$B/libdds.so" python3 bench/peers/decode_bench.py; }
export -f c_gpu memcheck python_gpu bindings peers decode nccl_env multigpu bench_nccl torch_multigpu bench_all \
  bench_shard ncu_plain

step c-gpu 300 c_gpu
step multigpu 120 multigpu
step bench-nccl 150 bench_nccl
step torch-multigpu 240 torch_multigpu
step python 120 python_gpu
step bindings 45 bindings
export PEERS_BUDGET=${PEERS_BUDGET:-90}
step peers "${PEERS_TIMEOUT:-150}" peers
step decode 60 decode
step bench 200 bench_all
step bench-shard 60 bench_shard
step memcheck 120 memcheck
step ncu 90 ncu_plain
tar -cf "$OUT/results.tar" docs/benchmarks 2>/dev/null
{
  echo "=== gpu-final summary ($(date -u +%FT%TZ))"
  printf '%s\n' "${SUMMARY[@]}"
} | tee -a "$OUT/summary.txt"
exit $FAILED
