#!/usr/bin/env bash
# A/B of two libdds builds on one GPU, in one run: the same outputs, bit for bit, and the time.
#
#   scripts/gpu/ab.sh OLD NEW OUT_DIR
#
# OLD and NEW are each a CUDA build (a CMake build folder or the flat .gpu-artifacts/build of
# scripts/gpu/prep.sh) or a git revision of this repository, which is then built first with
# scripts/gpu/build.sh into $AB_WORK/<revision> (default /tmp/dds-ab; needs the CUDA toolkit). Each
# side runs its own programs with its own library. Run on the GPU machine from a checkout.
#
# Steps (STEPS="cmp-sample bench" runs those only; each writes OUT_DIR/<step>.log):
#   cmp-sample  dds_profile_sample of OLD and of NEW on every shape of SAMPLE_SHAPES, the outputs of
#               the last call (tokens, argmax, log-prob, confidence, margin, entropy) compared
#               byte for byte; one line per shape: "same", "DIFFER" (with the number of rows that
#               differ in each output) or "FAILED", then each side's median time over CMP_CALLS
#   cmp-stash   the same with dds_profile_stash (ids, log-probs, ranks) on STASH_SHAPES
#   cmp-ops     dds_verify_drafts, dds_reveal and the shard kernels (partial + finish, every rank on
#               one GPU) on OPS_SHAPES: NEW's dds_profile_ops run once with OLD's libdds and once
#               with NEW's (the program reads only the C ABI, so it serves builds that predate it),
#               every output compared byte for byte (a build older than a feature differs on its
#               shapes by design: reveal policy 4, ENTROPY_BOUND, is newer than fb7a1da)
#   bench       dds_bench of OLD and NEW, alternating (OLD NEW, then NEW OLD with REPEATS=2, ...),
#               one section per process (--only sample, every run of both sides, then --only
#               stash), so that no row is timed right after the other section's rows in one
#               process (stash n5 all bf16 32000 x 4096 on an H100: 136-139 us for fb7a1da and
#               for the library after it as a section alone, 138.2 / 150.3 us after the sampling
#               rows); BENCH_ARGS with --only runs that section alone,
#               merged by scripts/gpu/bench-ab.py into OUT_DIR/bench-ab.md: per row the median
#               time of each side and NEW / OLD, the shift between the sides with its 95%
#               confidence interval, rows more than AB_TOLERANCE (default 0.03) slower marked,
#               "every run" beside those where every NEW run was slower than every OLD run and
#               "beyond the spread" where the whole interval is above the tolerance (short rows
#               vary by 3-16% from run to run: use REPEATS >= 12 for them, and an A/A run,
#               `ab.sh B B`, shows the spread)
# The exit status is non-zero if a step failed, an output differs or a row is marked slower.
#
# Environment:
#   SAMPLE_SHAPES  ';'-separated "dtype V rows scenario temperature" (dds_profile_sample's
#                  arguments; scenario plain|guided|topk|topp|minp|mix). Default: the dds_bench
#                  grid (f32 / bf16, V 1025 / 32000 / 151936 / 262144, 8 / 256 / 4096 rows, every
#                  scenario at T = 1, top-p also at T = 0.5 / 0.25, greedy plain) and the shapes at
#                  the launch plan's boundaries (V 2048 / 2049 / 40960 / 40961 / 300000, 264 / 265 /
#                  528 / 529 / 1023 / 1024 rows)
#   STASH_SHAPES   ';'-separated "dtype V rows keep_every n" (dds_profile_stash's arguments);
#                  default: the dds_bench stash grid and two odd shapes
#   OPS_SHAPES     ';'-separated dds_profile_ops arguments ("verify dtype V requests drafts
#                  scenario", "reveal rows requests policy", "shard dtype V rows ranks
#                  scenario"); default: grid_ops below
#   CMP_CALLS      calls per cmp-sample run (default 2; e.g. 30 for the median times of a plan A/B)
#   BENCH_ARGS     dds_bench arguments (e.g. "--only sample", "--quick"); REPEATS (default 1)
#   OLD_FLAGS, NEW_FLAGS  extra arguments appended to every program of that side, for builds
#                  whose programs take them: dds_profile_sample's --plan SPEC (launch plan
#                  overrides, kernels/sample/plan.h); with OLD = NEW and STEPS=cmp-sample this
#                  compares two plans of one build, output bytes and median times
set -u -o pipefail
. "$(dirname "$0")/lib.sh"
[ $# -eq 3 ] || dds_gpu_die "usage: scripts/gpu/ab.sh OLD NEW OUT_DIR"
mkdir -p "$3" && DDS_GPU_OUT=$(cd "$3" && pwd)
cd "$DDS_ROOT"
AB_WORK=${AB_WORK:-${TMPDIR:-/tmp}/dds-ab}

# side ARG: a build folder, built from a git revision if ARG is one.
side() {
  if [ -d "$1" ]; then dds_gpu_abs_build "$1"; return; fi
  local rev
  rev=$(git rev-parse --verify --quiet "$1^{commit}") || dds_gpu_die "$1: neither a build folder nor a git revision"
  if [ ! -e "$AB_WORK/$rev/libdds.so.0" ]; then
    echo "building $1 ($rev) in $AB_WORK/$rev" >&2
    DDS_BUILD_TESTS=OFF scripts/gpu/build.sh "$rev" "$AB_WORK/$rev" >&2 || dds_gpu_die "build of $1 failed"
  fi
  printf '%s\n' "$AB_WORK/$rev"
}
OLD=$(side "$1") || exit 2
NEW=$(side "$2") || exit 2
export OLD NEW DDS_GPU_OUT
DDS_GPU_NAME=$(dds_gpu_name)
echo "${DDS_GPU_NAME:-GPU unknown}; OLD $OLD ${OLD_FLAGS:-}; NEW $NEW ${NEW_FLAGS:-}"

grid_sample() {
  local dt V R sc s=""
  for dt in f32 bf16; do
    for V in 1025 32000 151936 262144; do
      for R in 8 256 4096; do
        for sc in plain guided topk topp minp mix; do s+="$dt $V $R $sc 1;"; done
        s+="$dt $V $R topp 0.5;$dt $V $R topp 0.25;$dt $V $R plain 0;"
      done
    done
  done
  for V in 2048 2049; do for sc in plain topk topp; do s+="f32 $V 4096 $sc 1;bf16 $V 264 $sc 1;bf16 $V 265 $sc 1;f32 $V 528 $sc 1;f32 $V 529 $sc 1;"; done; done
  for V in 40960 40961 300000; do for sc in plain topp minp; do s+="f32 $V 64 $sc 1;bf16 $V 1023 $sc 1;bf16 $V 1024 $sc 1;"; done; done
  printf '%s' "${s%;}"
}
grid_stash() {
  local dt V R K n s=""
  for dt in bf16 f32; do for V in 32000 262144; do for R in 256 4096; do for K in 1 16; do for n in 5 20; do
    s+="$dt $V $R $K $n;"
  done; done; done; done; done
  printf '%s' "${s}f32 1025 64 1 20;bf16 7 100 3 5"
}

grid_ops() {
  local dt V sc P R s=""
  for dt in f32 bf16; do
    for V in 1025 32000 151936; do for sc in plain topk topp minp; do s+="verify $dt $V 64 4 $sc;"; done; done
    for V in 32000 151936; do for R in 2 4; do for sc in plain topk topp; do s+="shard $dt $V 256 $R $sc;"; done; done; done
    s+="shard $dt 262144 8 8 topp;verify $dt 32000 256 8 topp;"
  done
  for P in 0 1 2 3 4; do s+="reveal 4096 64 $P;reveal 8 1 $P;"; done
  printf '%s' "${s%;}"
}

# compare_ops SHAPES: NEW's dds_profile_ops with OLD's and with NEW's libdds; 1 if any differs.
compare_ops() {
  local prog rc=0 s side b f ok n=0
  local -a shapes
  prog=$(dds_gpu_bin "$NEW" dds_profile_ops) || { echo "no dds_profile_ops in $NEW"; return 1; }
  IFS=';' read -ra shapes <<<"$1"
  for s in "${shapes[@]}"; do
    ok=1
    rm -f "$DDS_GPU_OUT"/.dump-*.bin
    for side in old new; do
      if [ $side = old ]; then b=$OLD; else b=$NEW; fi
      f="$DDS_GPU_OUT/.dump-$side.bin"
      LD_LIBRARY_PATH="$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 120 "$prog" $s --dump "$f" >/dev/null 2>&1 || ok=0
      [ -s "$f" ] || ok=0
    done
    n=$((n + 1))
    if [ $ok = 0 ]; then echo "FAILED  $s"; rc=1
    elif cmp -s "$DDS_GPU_OUT/.dump-old.bin" "$DDS_GPU_OUT/.dump-new.bin"; then echo "same    $s"
    else echo "DIFFER  $s"; rc=1; fi
  done
  rm -f "$DDS_GPU_OUT"/.dump-*.bin
  echo "dds_profile_ops: $n shapes"
  return $rc
}

# sample_diff OLD NEW ROWS: how many rows differ in each output of two dds_profile_sample dumps.
sample_diff() {
  python3 - "$@" <<'PY'
import sys
a, b, n = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read(), int(sys.argv[3])
names = ('tokens', 'argmax', 'logprob', 'confidence', 'margin', 'entropy')
print(', '.join(f'{k} {sum(a[4*j:4*j+4] != b[4*j:4*j+4] for j in range(i*n, (i+1)*n))}' for i, k in enumerate(names)))
PY
}

# compare PROGRAM SHAPES: both sides' dumps of each shape compared; 1 if any differs or fails.
# Each program runs 2 calls (dds_profile_sample CMP_CALLS; the dump holds the last); the line of a
# dds_profile_sample shape ends with each side's median time. The dump file is named both ways
# (a trailing --dump FILE, and DDS_PROFILE_DUMP for older builds' programs); every positional
# argument is given, so the trailing pair is never read as one.
compare() {
  local prog=$1 rc=0 s side_dir flags ok out times calls=${CMP_CALLS:-2}
  local -a shapes
  IFS=';' read -ra shapes <<<"$2"
  for s in "${shapes[@]}"; do
    read -r a1 a2 a3 a4 a5 <<<"$s"
    if [ "$prog" = dds_profile_sample ]; then args="$a1 $a2 $a3 $a4 $calls ${a5:-1}"; else args="$s 2"; fi
    ok=1 times=""
    rm -f "$DDS_GPU_OUT"/.dump-*.bin
    for side_dir in old new; do
      if [ $side_dir = old ]; then b=$OLD flags=${OLD_FLAGS:-}; else b=$NEW flags=${NEW_FLAGS:-}; fi
      f="$DDS_GPU_OUT/.dump-$side_dir.bin"
      out=$(LD_LIBRARY_PATH="$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DDS_PROFILE_DUMP="$f" \
        timeout 120 "$(dds_gpu_bin "$b" "$prog")" $args --dump "$f" $flags 2>&1) || ok=0
      [ -s "$f" ] || ok=0
      # dds_profile_sample's last line: "... median X us over N calls"
      [ "$prog" = dds_profile_sample ] &&
        times+=" $side_dir $(printf '%s\n' "$out" | sed -n 's/.*median \([0-9.]*\) us.*/\1/p' | tail -1)"
    done
    [ -n "$times" ] && times="  (median us:${times})"
    if [ $ok = 0 ]; then echo "FAILED  $s"; rc=1
    elif cmp -s "$DDS_GPU_OUT/.dump-old.bin" "$DDS_GPU_OUT/.dump-new.bin"; then echo "same    $s$times"
    elif [ "$prog" = dds_profile_sample ]; then
      echo "DIFFER  $s ($(sample_diff "$DDS_GPU_OUT"/.dump-old.bin "$DDS_GPU_OUT"/.dump-new.bin "$a3") rows differ)$times"; rc=1
    else echo "DIFFER  $s"; rc=1; fi
  done
  rm -f "$DDS_GPU_OUT"/.dump-*.bin
  echo "$prog: $(printf '%s\n' "${shapes[@]}" | wc -l) shapes"
  return $rc
}
bench_ab() {
  local i order=() rc=0 sec sections=(sample stash) only=()
  case " ${BENCH_ARGS:-} " in *" --only "*) sections=(all) ;; esac
  for ((i = 0; i < ${REPEATS:-1}; ++i)); do
    if ((i % 2 == 0)); then order+=(old new); else order+=(new old); fi
  done
  for sec in "${sections[@]}"; do
    [ "$sec" = all ] && only=() || only=(--only "$sec")
    i=0
    for s in "${order[@]}"; do
      if [ "$s" = old ]; then b=$OLD flags=${OLD_FLAGS:-}; else b=$NEW flags=${NEW_FLAGS:-}; fi
      echo "--- dds_bench ${only[*]} $s (run $i)"
      LD_LIBRARY_PATH="$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$(dds_gpu_bin "$b" dds_bench)" ${BENCH_ARGS:-} "${only[@]}" $flags \
        >"$DDS_GPU_OUT/bench-$s-$i-$sec.txt" 2>&1 || rc=1
      i=$((i + 1))
    done
  done
  python3 "$DDS_ROOT/scripts/gpu/bench-ab.py" --tolerance "${AB_TOLERANCE:-0.03}" \
    --old "$DDS_GPU_OUT"/bench-old-*.txt --new "$DDS_GPU_OUT"/bench-new-*.txt \
    >"$DDS_GPU_OUT/bench-ab.md" || rc=1
  cat "$DDS_GPU_OUT/bench-ab.md"
  return $rc
}
export -f compare compare_ops sample_diff bench_ab dds_gpu_bin
TAIL_LINES=${TAIL_LINES:-12}
dds_gpu_step cmp-sample 3600 "compare dds_profile_sample '${SAMPLE_SHAPES:-$(grid_sample)}'"
dds_gpu_step cmp-stash 1200 "compare dds_profile_stash '${STASH_SHAPES:-$(grid_stash)}'"
dds_gpu_step cmp-ops 1200 "compare_ops '${OPS_SHAPES:-$(grid_ops)}'"
dds_gpu_step bench 3600 bench_ab
dds_gpu_summary "scripts/gpu/ab.sh $1 $2"
exit $DDS_GPU_FAILED
