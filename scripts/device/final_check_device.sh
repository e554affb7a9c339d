#!/usr/bin/env bash
# A session's closing check on the GPU machine, one call (bundle-pack/ and .peers/ carried):
#   1. every GPU test program and memcheck (scripts/gpu_check.sh, no benchmark);
#   2. gpu_bench_cuda decode steps at batches 1 and 2 (graphs on), gpt2 / llama-1b / llama-8b;
#   3. transformers 5.17 on random checkpoints of the gpt2 and llama-1b shapes
#      (.peers/make_models.py) beside `roseinfer bench` at batch 1 on the same shapes (bf16), with
#      llama-8b bf16 at batch 1, both in bf16 at batch 8, and llama-1b / llama-8b --quantize q4_k
#      at batches 1, 2, 4 and 8.
# Everything lands in $OUT/final_check.tgz; the summary is printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/final_check_out}
OUT=/tmp/final_check_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

OUT="$OUT/gpu_check" GPU_CHECK_BENCH=0 timeout 330 bash scripts/gpu_check.sh >"$OUT/gpu_check.txt" 2>&1
sed -n '/== summary/,$p' "$OUT/gpu_check.txt" | tee -a "$SUMMARY"

step grid 240 env ROSEINFER_BENCH_MODELS=gpt2,llama-1b,llama-8b ROSEINFER_BENCH_BATCHES=1,2 \
  ROSEINFER_BENCH_GRAPHS=on "$B/gpu_bench_cuda" --no-skip
grep -E "^(gpt2|llama)" "$OUT/grid.txt" | sed "s/^/grid: /" | tee -a "$SUMMARY"

peer_b1 gpt2 llama1b
offline_bench gpt2_b1_bf16 1 --model gpt2 --max-model-len 1024
for model in llama-1b llama-8b; do
  for batch in 1 8; do offline_bench "${model}_b${batch}_bf16" $batch --model $model --max-model-len 4096; done
  for batch in 1 2 4 8; do
    offline_bench "${model}_b${batch}_q4_k" $batch --model $model --max-model-len 4096 --quantize q4_k
  done
done

tar czf "$FINAL/final_check.tgz" -C "$OUT" .
echo "=== summary"
cat "$SUMMARY"
