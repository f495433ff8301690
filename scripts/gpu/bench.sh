#!/usr/bin/env bash
# The benchmarks behind bench/RESULTS.md and docs/benchmarks/. Run on the GPU machine from a
# checkout:
#
#   scripts/gpu/bench.sh BUILD OUT_DIR
#
# BUILD: a CUDA build (scripts/gpu/build.sh) or the flat .gpu-artifacts/build of
# scripts/gpu/prep.sh. Each step writes OUT_DIR/<step>.log (the tables as the programs print them)
# and OUT_DIR/summary.txt; the peers and decode steps rewrite docs/benchmarks/ in the checkout and
# copy it to OUT_DIR/benchmarks/.
#
# Steps (STEPS="sample stash" runs those only):
#   sample      dds_bench --only sample   (bench/RESULTS.md "dds_sample"; BENCH_ARGS=--quick)
#   stash       dds_bench --only stash    (bench/RESULTS.md "dds_stash_logprobs")
#   shard       dds_bench_shard           (one GPU, R = 2/4/8 simulated ranks)
#   nccl        dds_bench_nccl            (>= 2 GPUs, libdds_nccl)
#   peers       bench/peers/run.py        (docs/benchmarks/peers.md and plots; needs torch, and
#                                          .fi/ .vllm/ from scripts/prep-peers.sh for FlashInfer
#                                          and vLLM; PEERS_BUDGET seconds, default 250)
#   decode      bench/peers/decode_bench.py (docs/benchmarks/decode.md)
set -u -o pipefail
. "$(dirname "$0")/lib.sh"
[ $# -eq 2 ] || dds_gpu_die "usage: scripts/gpu/bench.sh BUILD OUT_DIR"
B=$(dds_gpu_abs_build "$1")
mkdir -p "$2" && DDS_GPU_OUT=$(cd "$2" && pwd)
cd "$DDS_ROOT"
dds_gpu_use_build "$B"
export B DDS_GPU_OUT PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DDS_GPU_NAME=$(dds_gpu_name)
echo "$DDS_GPU_NAME"
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
lib="$B/libdds.so"
[ -e "$lib" ] || lib="$B/libdds.so.0"
TAIL_LINES=${TAIL_LINES:-4}

dds_gpu_step sample 1200 "\"$(dds_gpu_bin "$B" dds_bench)\" --only sample ${BENCH_ARGS:-}"
dds_gpu_step stash 600 "\"$(dds_gpu_bin "$B" dds_bench)\" --only stash ${BENCH_ARGS:-}"
dds_gpu_step shard 600 "\"$(dds_gpu_bin "$B" dds_bench_shard)\""
if [ "$NGPU" -ge 2 ]; then
  dds_gpu_step nccl 600 "LD_LIBRARY_PATH=\$LD_LIBRARY_PATH:/usr/local/cuda/lib64 \"$(dds_gpu_bin "$B" dds_bench_nccl)\""
fi
dds_gpu_step peers $((${PEERS_BUDGET:-250} * 3 / 2 + 120)) \
  "DDS_LIB=$lib python3 bench/peers/run.py --budget ${PEERS_BUDGET:-250}"
dds_gpu_step decode 300 "DDS_LIB=$lib python3 bench/peers/decode_bench.py"
if [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" peers "* || " $STEPS " == *" decode "* ]]; then
  rm -rf "$DDS_GPU_OUT/benchmarks" && cp -a docs/benchmarks "$DDS_GPU_OUT/benchmarks"
fi
dds_gpu_summary "scripts/gpu/bench.sh $B"
exit $DDS_GPU_FAILED
