#!/usr/bin/env bash
# The cluster decode attention (kernels/cuda/attention_decode.cu) on the GPU machine: GPU tests
# (TESTS picks them), gpu_bench_cuda decode steps at batch 1 and 16 with it on, off
# (ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=0, the split-KV kernel) and the previous commit's
# binary (bundle/gpu_bench_cuda-base), twice each in alternation, and ncu's durations of the
# attention kernels of one batch-1 step, on and off. Run from the repository root with
# bundle-pack/ carried; everything lands in $OUT, the summary is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/cluster_attention_out}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
TESTS=${TESTS:-"kernels backend"}
for t in $TESTS; do step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"; done

MODELS=${MODELS:-gpt2,llama-1b,llama-8b}
BATCHES=${BATCHES:-1,16}
grid() {  # NAME BIN ENV...: gpu_bench_cuda decode steps, graphs on
  local name=$1 bin=$2
  shift 2
  step "$name" 240 env ROSEINFER_BENCH_MODELS="$MODELS" ROSEINFER_BENCH_BATCHES="$BATCHES" \
    ROSEINFER_BENCH_GRAPHS=on "$@" "$bin" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}
for round in 1 2; do
  grid "base_$round" "$B/gpu_bench_cuda-base"
  grid "off_$round" "$B/gpu_bench_cuda" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=0
  grid "on_$round" "$B/gpu_bench_cuda"
done

NCU="ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum,launch__grid_size"
for model in llama-1b gpt2; do
  for mode in on off; do
    rows=16
    [[ $mode == off ]] && rows=0
    step "ncu_${model}_$mode" 180 env ROSEINFER_BENCH_MODELS=$model ROSEINFER_BENCH_BATCHES=1 \
      ROSEINFER_BENCH_GRAPHS=off ROSEINFER_BENCH_PROFILE_STEP=5 \
      ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=$rows \
      $NCU --profile-from-start off -k regex:attention "$B/gpu_bench_cuda" --no-skip
    python3 - "$OUT/ncu_${model}_$mode.txt" "ncu_${model}_$mode" <<'PY' | tee -a "$SUMMARY"
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if len(rows) < 3:
    print(sys.argv[2], "no kernels"); sys.exit()
head = rows[0]
t = head.index("gpu__time_duration.sum")
name = head.index("Kernel Name")
times = [float(r[t].replace(",", "")) for r in rows[2:]]
kinds = sorted(set(r[name].split("(")[0] for r in rows[2:]))
print(sys.argv[2], "attention launches=%d mean_us=%.2f" % (len(times), sum(times) / len(times) / 1e3), kinds)
PY
  done
done
cat "$SUMMARY"
