#!/usr/bin/env bash
# A short check of x's int8 copy from the add-norm and SiLU-and-mul kernels (issue 12), on the GPU
# machine from the repository root with bundle-pack/ carried (roseinfer, roseinfer-base = 24bc495,
# gpu_test_cuda_gemv_quant, gpu_test_cuda_backend): the copy's kernel test case and the backend
# tests, then llama-1b at 8 and 24 rows and llama-8b at 8 `--quantize q4_k` on both builds, and
# llama-1b at 8 with ROSEINFER_CUDA_QUANT_MMA_X_FUSED=0. One round, grid:B:512:128.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/int8_x_check_out
step gpu_test_cuda_gemv_quant_int8_x 120 "$B/gpu_test_cuda_gemv_quant" \
  "--test-case=*int8 copy from the add-norm*"
step gpu_test_cuda_backend 120 "$B/gpu_test_cuda_backend"
base_and_new_bench llama1b_b8_q4_k 8 --model llama-1b --quantize q4_k
base_and_new_bench llama1b_b24_q4_k 24 --model llama-1b --quantize q4_k
offline_bench llama1b_b8_q4_k_x_unfused 8 ROSEINFER_CUDA_QUANT_MMA_X_FUSED=0 --model llama-1b \
  --quantize q4_k
base_and_new_bench llama8b_b8_q4_k 8 --model llama-8b --quantize q4_k
device_pack
