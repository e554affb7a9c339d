#!/usr/bin/env bash
# Session 42, calls 5 and 7 (nvidia-h200; calls 4 and 6 carried roseinfer-base alone, unpacked into /tmp/base):
# the direct quantized GEMV quantizing x two lanes per 32-element block (quantize_sixteen, in
# quantize_x_sixteens and norm_quantize_one_row) against roseinfer-base (a107565: four lanes a
# block). The GEMV test (the direct kernel's bits against the staged kernel's, on ordinary values
# and on NaN, inf, subnormal and tiny ones) first.
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/x_sixteens
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for round in 1 2; do
  for m in llama-8b llama-1b; do
    tag=${m//-/}
    base_and_new_bench "${tag}_b1_q4_k_r$round" 1 --model $m --quantize q4_k
    offline_bench "${tag}_b1_bf16_r$round" 1 --model $m
  done
done
base_and_new_bench llama8b_b1_q4_k_m 1 --model llama-8b --quantize q4_k_m
for q in q8_0 q4_0 q6_k; do
  base_and_new_bench "llama1b_b1_$q" 1 --model llama-1b --quantize $q
done
base_and_new_bench llama8b_b4_q4_k 4 --model llama-8b --quantize q4_k
decode_step_table
device_pack
