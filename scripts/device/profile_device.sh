#!/usr/bin/env bash
# Where the time of a small step goes, on the GPU machine (bundle-pack/ carried, holding
# roseinfer and gpu_bench_cuda):
#   - ncu per-kernel durations and DRAM bytes of one batch-1 decode step (llama-1b, gpt2; CUDA
#     graphs off so ncu sees each launch), beside the step time with graphs on, PDL on and off;
#   - seed000 (gpt2, offline, prefix cache): repeats in one process, and with the CUDA module
#     loading eager, to see what the first step of a new shape pays; ncu on its decode attention.
# Outputs land in $OUT (kernels_<model>.csv, *.txt) with summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/profile_out}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
NCU="ncu --clock-control none --csv --page raw"
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__registers_per_thread

bench_b1() {  # NAME ENV...: gpu_bench_cuda at batch 1 with graphs on
  local name=$1
  shift
  step "$name" 120 env ROSEINFER_BENCH_MODELS=gpt2,llama-1b ROSEINFER_BENCH_BATCHES=1 \
    ROSEINFER_BENCH_GRAPHS=on "$@" "$B/gpu_bench_cuda" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}
bench_b1 b1_pdl_on
bench_b1 b1_pdl_off ROSEINFER_CUDA_PDL=0

for model in llama-1b gpt2; do
  step "ncu_b1_$model" 180 env ROSEINFER_BENCH_MODELS=$model ROSEINFER_BENCH_BATCHES=1 \
    ROSEINFER_BENCH_GRAPHS=off ROSEINFER_BENCH_PROFILE_STEP=5 \
    $NCU --profile-from-start off --metrics $METRICS "$B/gpu_bench_cuda" --no-skip
  grep '^"' "$OUT/ncu_b1_$model.txt" >"$OUT/kernels_$model.csv"
done

seed() {  # NAME ENV...: seed000 offline with the cache, 3 repeats in one process
  local name=$1
  shift
  step "$name" 120 env "$@" "$B/roseinfer" bench --model gpt2 --device cuda --dataset-name seed000 \
    --mode offline --repeat 3 --json "$OUT/$name.json"
  python3 - "$OUT/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
for r in d.get("runs", []):
    m = r.get("metrics", r)
    print(sys.argv[2], "duration_ms=%.2f ttft_ms=%.2f tpot_ms=%.3f execute_s=%.4f steps=%s" % (
        1e3 * m["duration"], m["p50_ttft_ms"], m["p50_tpot_ms"], m["execute_time_s"], m["steps"]))
PY
}
seed seed000_default ROSEINFER_CUDA_STATS=1
seed seed000_eager CUDA_MODULE_LOADING=EAGER
step ncu_seed000_attention 240 $NCU -k regex:attention --launch-skip 120 --launch-count 30 \
  --metrics $METRICS,lts__t_bytes.sum "$B/roseinfer" bench --model gpt2 --device cuda \
  --dataset-name seed000 --mode offline
grep '^"' "$OUT/ncu_seed000_attention.txt" >"$OUT/kernels_seed000_attention.csv"
cat "$SUMMARY"
