#!/usr/bin/env bash
# The int8 tensor-core GEMV's tests and its decode figures against the previous build (issue 12),
# on the GPU machine from the repository root with bundle-pack/ carried (roseinfer,
# roseinfer-base, gpu_test_cuda_gemv_quant, gpu_test_cuda_backend): llama-1b and llama-8b
# `--quantize q4_k` at 8, 16 and 32 rows (base and new, side by side) and bf16; llama-1b at 1 and
# 64 rows; with ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=33 at 16 rows (the path before the kernel); one
# round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_mma_final_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
for model in llama-1b llama-8b; do
  batches="1 8 16 32 64"
  [[ $model == llama-8b ]] && batches="8 16 32"
  for b in $batches; do
    tag="${model//-/}_b$b"
    offline_bench "${tag}_bf16" "$b" --model "$model"
    base_and_new_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
    if [[ $b == 16 ]]; then
      offline_bench "${tag}_q4_k_before" "$b" ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=33 \
        --model "$model" --quantize q4_k
    fi
  done
done
device_pack
