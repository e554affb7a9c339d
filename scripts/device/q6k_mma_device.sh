#!/usr/bin/env bash
# Q6_K on the int8 tensor-core GEMV (Q4_K_M's lm_head, v rows and down in some layers), issue 12,
# on the GPU machine from the repository root with bundle-pack/ carried (roseinfer,
# gpu_test_cuda_gemv_quant, gpu_test_cuda_backend): the tests, then `--quantize q4_k_m` decode
# with Q6_K on the int8 GEMV and with ROSEINFER_CUDA_QUANT_MMA_Q6K=0 (the paths before: the dp4a
# GEMV at 5-8 rows, the tile GEMM past them): llama-1b at 8, 16 and 32 rows, llama-8b at 8
# (grid:B:512:128, one round).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/q6k_mma_out
step gpu_test_cuda_gemv_quant 150 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 60 "$B/gpu_test_cuda_backend"
for run in "llama-1b 8" "llama-1b 16" "llama-8b 8" "llama-1b 32"; do
  read -r model b <<<"$run"
  tag="${model//-/}_b${b}_q4_k_m"
  offline_bench "${tag}_before" "$b" ROSEINFER_CUDA_QUANT_MMA_Q6K=0 --model "$model" --quantize q4_k_m
  offline_bench "${tag}_q6k_mma" "$b" --model "$model" --quantize q4_k_m
done
decode_step_table
device_pack
