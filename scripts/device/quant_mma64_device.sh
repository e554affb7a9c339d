#!/usr/bin/env bash
# The int8 tensor-core GEMV with the lighter fold (row factors once per sub-block, x prefetched a
# sub-block ahead) and up to 64 rows, against the previous build (issue 12), on the GPU machine
# from the repository root with bundle-pack/ carried (roseinfer, roseinfer-base and the GPU tests
# below): llama-1b and llama-8b `--quantize q4_k` at 8-64 rows, base and new side by side, with
# bf16 beside them; llama-1b Q8_0 and Q4_0 on the kernel (ROSEINFER_CUDA_QUANT_MMA_ALL_TYPES=1)
# against their default path. One round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_mma64_out
step gpu_test_cuda_gemv_quant 400 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
step gpu_test_cuda_batch_invariance 300 "$B/gpu_test_cuda_batch_invariance"
q4k_rows_bench llama-1b "8 16 32 48 64"
q4k_rows_bench llama-8b "8 16 32 64"
for type in q8_0 q4_0; do
  for b in 16 64; do
    offline_bench "llama1b_b${b}_${type}" "$b" --model llama-1b --quantize "$type"
    offline_bench "llama1b_b${b}_${type}_mma" "$b" ROSEINFER_CUDA_QUANT_MMA_ALL_TYPES=1 \
      --model llama-1b --quantize "$type"
  done
done
device_pack
