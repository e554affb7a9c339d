#!/usr/bin/env bash
# The direct quantized GEMV's two-block build for wide plain products (kTwoBlockMinFeatures,
# kernels/cuda/gemv_quant.cu) against the previous build: the GEMV test (its batch-invariance
# checks compare the 1-row launch, now two-block at >= 4096 features, with the 8-row kernel's bits),
# then roseinfer-base and roseinfer side by side, two interleaved rounds of llama-8b and llama-1b
# Q4_K at batch 1. bundle-pack/ carried (roseinfer, roseinfer-base, gpu_test_cuda_gemv_quant).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_two_blocks
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for r in 1 2; do
  for m in llama-8b llama-1b; do
    base_and_new_bench "${m}_q4k_r$r" 1 --model "$m" --quantize q4_k
  done
done
device_pack
