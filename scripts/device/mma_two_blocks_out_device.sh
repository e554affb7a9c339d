#!/usr/bin/env bash
# Four column tiles (17-32 rows) at two blocks an SM where W has out >= 4096 rows (every llama-8b
# projection, llama-1b's gate|up) against the build with one block an SM there (roseinfer-base,
# 0cf04fd), issue 12, on the GPU machine from the repository root with bundle-pack/ carried
# (roseinfer, roseinfer-base, gpu_test_cuda_gemv_quant): the kernel test, then llama-1b and
# llama-8b `--quantize q4_k` decode at 17-32 rows on both builds (one round, grid:B:512:128),
# then ncu's per-kernel times over ~2 decode steps (no graphs) at 8 and 24 rows, Q4_K and bf16.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/mma_two_blocks_out_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for model in llama-1b llama-8b; do
  for b in 17 20 24 28 32; do
    base_and_new_bench "${model//-/}_b${b}_q4_k" "$b" --model "$model" --quantize q4_k
  done
done
# Launches per decode step: ~120 (llama-1b), ~240 (llama-8b); skip past prefill and warm-up.
for model in llama-1b llama-8b; do
  launches=250
  [[ $model == llama-8b ]] && launches=500
  for b in 8 24; do
    for weights in q4_k bf16; do
      name="ncu_${model//-/}_b${b}_$weights"
      quant=()
      [[ $weights == q4_k ]] && quant=(--quantize q4_k)
      step "$name" 240 ncu --clock-control none --csv --page details \
        --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count "$launches" \
        "$B/roseinfer" bench --device cuda --mode offline --dataset-name "grid:$b:512:64" \
        --model "$model" --no-cuda-graph "${quant[@]}"
      grep '^"' "$OUT/$name.txt" >"$OUT/$name.csv"
      python3 scripts/ncu_summary.py "$OUT/$name.csv" 12 | tee -a "$SUMMARY"
      rm -f "$OUT/$name.txt"
    done
  done
done
device_pack
