#!/usr/bin/env bash
# Session 42, call 3 (nvidia-h200; call 2 carried roseinfer-base alone, unpacked into /tmp/base):
# the direct quantized GEMV quantizing x a lane per 32-element block (quantize_block) against
# roseinfer-base (a107565, four lanes a block) and against ROSEINFER_CUDA_GEMV_QUANT_X_BY_BLOCK=0
# (the same binary taking quantize_x as before). The GEMV test (bits against the staged kernel and
# against quantize_eight on NaN, inf, subnormal and tiny values) first.
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/x_by_block
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
OFF=ROSEINFER_CUDA_GEMV_QUANT_X_BY_BLOCK=0
for round in 1 2; do
  for m in llama-8b llama-1b; do
    tag=${m//-/}
    base_offline_bench "${tag}_b1_q4_k_base_r$round" 1 --model $m --quantize q4_k
    offline_bench "${tag}_b1_q4_k_new_r$round" 1 --model $m --quantize q4_k
    offline_bench "${tag}_b1_q4_k_off_r$round" 1 $OFF --model $m --quantize q4_k
    offline_bench "${tag}_b1_bf16_r$round" 1 --model $m
  done
done
base_and_new_bench llama8b_b1_q4_k_m 1 --model llama-8b --quantize q4_k_m
for q in q8_0 q4_0; do
  base_and_new_bench "llama1b_b1_$q" 1 --model llama-1b --quantize $q
done
decode_step_table
device_pack
