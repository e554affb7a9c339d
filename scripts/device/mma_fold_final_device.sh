#!/usr/bin/env bash
# The int8 tensor-core GEMV's lighter fold (1a9fbfa), back at 32 rows at most, against the
# session's start (f3365a4, roseinfer-base) in one call (issue 12), on the GPU machine from the
# repository root with bundle-pack/ carried (roseinfer, roseinfer-base, gpu_test_cuda_gemv_quant,
# gpu_test_cuda_backend, gpu_test_cuda_engine, gpu_test_cuda_batch_invariance): llama-1b and
# llama-8b `--quantize q4_k` decode at 5-32 rows with bf16 beside them, and at 24 and 32 rows
# ROSEINFER_CUDA_QUANT_MMA_TWO_BLOCKS=1 (one weight tile a block, two blocks an SM; a switch of
# 59d860c to the session's end, removed in its review: later builds ignore it). One round,
# grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/mma_fold_final_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
step gpu_test_cuda_batch_invariance 300 "$B/gpu_test_cuda_batch_invariance"
for model in llama-1b llama-8b; do
  batches="5 8 16 24 32"
  [[ $model == llama-8b ]] && batches="8 16 24 32"
  for b in $batches; do
    tag="${model//-/}_b$b"
    offline_bench "${tag}_bf16" "$b" --model "$model"
    base_and_new_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
    if [[ $b -ge 24 ]]; then
      offline_bench "${tag}_q4_k_two_blocks" "$b" ROSEINFER_CUDA_QUANT_MMA_TWO_BLOCKS=1 \
        --model "$model" --quantize q4_k
    fi
  done
done
device_pack
