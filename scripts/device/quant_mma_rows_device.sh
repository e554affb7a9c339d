#!/usr/bin/env bash
# Where the int8 tensor-core GEMV should start (issue 12), on the GPU machine from the repository
# root with bundle-pack/ carried (roseinfer): llama-1b and llama-8b `--quantize q4_k` decode at
# 1, 5, 6 and 8 rows with the default rule (from 5 rows, gate|up included),
# ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=9 (the dp4a GEMV up to 8 rows) and, at 1 row, =1 (the unfused
# lm_head on it too), beside bf16; one round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_mma_rows_out
for model in llama-1b llama-8b; do
  batches="1 5 6 8"
  [[ $model == llama-8b ]] && batches="1 8"
  for b in $batches; do
    tag="${model//-/}_b$b"
    offline_bench "${tag}_bf16" "$b" --model "$model"
    offline_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
    offline_bench "${tag}_q4_k_dp4a" "$b" ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=9 --model "$model" \
      --quantize q4_k
    if [[ $b == 1 ]]; then
      offline_bench "${tag}_q4_k_mma_lm_head" "$b" ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=1 \
        --model "$model" --quantize q4_k
    fi
  done
done
device_pack
