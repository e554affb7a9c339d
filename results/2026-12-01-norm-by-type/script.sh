#!/usr/bin/env bash
# Session 43, call 2 (nvidia-h200; call 1 carried roseinfer-base alone, unpacked into /tmp/base):
# the one-row norm path sixteen elements a thread (quantize_sixteen) for the 32-element block
# types (Q8_0, Q4_0, Q4_1; --quantize makes the first two), eight a thread (quantize_eight) kept for Q4_K and Q6_K, against
# roseinfer-base (6e0d82c: eight a thread for every type). The GEMV test (the direct kernel's
# bits against the staged kernel's) first.
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/norm_by_type
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for round in 1 2; do
  for q in q8_0 q4_0 q4_k; do
    base_and_new_bench "llama1b_b1_${q}_r$round" 1 --model llama-1b --quantize $q
  done
done
for q in q8_0 q4_0; do
  base_and_new_bench "llama8b_b1_$q" 1 --model llama-8b --quantize $q
done
base_and_new_bench gpt2_b1_q4_0 1 --model gpt2 --quantize q4_0
base_and_new_bench llama1b_b1_q4_k_m 1 --model llama-1b --quantize q4_k_m
decode_step_table
device_pack
