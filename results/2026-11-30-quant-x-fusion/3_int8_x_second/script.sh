#!/usr/bin/env bash
# x's int8 copy written by the add-norm and SiLU-and-mul kernels for the int8 tensor-core GEMV
# (no quantize launch before qkv, gate|up, down and lm_head) against the build before it
# (roseinfer-base, 24bc495), issue 12, on the GPU machine from the repository root with
# bundle-pack/ carried (roseinfer, roseinfer-base, gpu_test_cuda_gemv_quant, gpu_test_cuda_backend,
# gpu_test_cuda_batch_invariance, gpu_test_cuda_kernels): the tests, then llama-1b and llama-8b
# `--quantize q4_k` decode on both builds, bf16 at 8 and 32 rows, and at 8 and 24 rows the new
# build with ROSEINFER_CUDA_QUANT_MMA_X_FUSED=0 (its GEMV quantizing every x). One round,
# grid:B:512:128.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/int8_x_fusion_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_batch_invariance 300 "$B/gpu_test_cuda_batch_invariance"
step gpu_test_cuda_kernels 300 "$B/gpu_test_cuda_kernels"
for model in llama-1b llama-8b; do
  batches="5 8 16 24 32"
  [[ $model == llama-8b ]] && batches="8 16 32"
  for b in $batches; do
    tag="${model//-/}_b$b"
    [[ $b == 8 || $b == 32 ]] && offline_bench "${tag}_bf16" "$b" --model "$model"
    base_and_new_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
  done
  for b in 8 24; do
    offline_bench "${model//-/}_b${b}_q4_k_x_unfused" "$b" ROSEINFER_CUDA_QUANT_MMA_X_FUSED=0 \
      --model "$model" --quantize q4_k
  done
done
device_pack
