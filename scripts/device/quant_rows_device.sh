#!/usr/bin/env bash
# Which path a quantized decode batch of 16-64 rows should take (issue 12), on the GPU machine
# from the repository root with bundle-pack/ carried (roseinfer): llama-1b and llama-8b at
# `--quantize q4_k` on the tile-decoding GEMM (the default rule up to its row limits) and with it
# turned off (ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0: each matrix decoded to bf16, then cuBLAS),
# beside bf16 at the same batch; one round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_rows_out
for model in llama-1b llama-8b; do
  batches="16 32 64"
  [[ $model == llama-8b ]] && batches="16 64"
  for b in $batches; do
    tag="${model//-/}_b$b"
    offline_bench "${tag}_bf16" "$b" --model "$model"
    offline_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
    offline_bench "${tag}_q4_k_decoded" "$b" ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0 --model "$model" \
      --quantize q4_k
  done
done
device_pack
