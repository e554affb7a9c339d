#!/usr/bin/env bash
# Session 40, call 7 (call 6 carried roseinfer-base alone): the batch-1 quantized GEMV's x preparation made shorter, untraced:
# norm_quantize_one_row (one trip to memory for a row with the norm input;
# ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=0 turns it off) and quantize_eight rounding by an FADD
# instead of F2I (no switch). roseinfer-base: e9ac9fd (the session's last commit before them).
# The GPU tests that cover the changed code first.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/one_row_norm_final
# The base binary came in a call of its own (the carry limit): unpacked there into /tmp/base.
[[ -x $B/roseinfer-base ]] || cp /tmp/base/bundle/roseinfer-base "$B/"
"$B/roseinfer-base" --version >>"$OUT/device.txt"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"


for round in 1 2; do
  base_offline_bench "llama8b_b1_q4_k_base_r$round" 1 --model llama-8b --quantize q4_k
  offline_bench "llama8b_b1_q4_k_new_r$round" 1 --model llama-8b --quantize q4_k
  base_offline_bench "llama1b_b1_q4_k_base_r$round" 1 --model llama-1b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_new_r$round" 1 --model llama-1b --quantize q4_k
done
offline_bench llama8b_b1_q4_k_new_norm0 1 ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=0 --model llama-8b --quantize q4_k
offline_bench llama1b_b1_q4_k_new_norm0 1 ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=0 --model llama-1b --quantize q4_k
offline_bench llama8b_b1_bf16 1 --model llama-8b
offline_bench llama1b_b1_bf16 1 --model llama-1b
base_offline_bench llama8b_b1_q4_k_m_base 1 --model llama-8b --quantize q4_k_m
offline_bench llama8b_b1_q4_k_m_new 1 --model llama-8b --quantize q4_k_m
for q in q8_0 q4_0; do
  base_offline_bench "llama1b_b1_${q}_base" 1 --model llama-1b --quantize $q
  offline_bench "llama1b_b1_${q}_new" 1 --model llama-1b --quantize $q
done
for b in 8 16; do
  base_offline_bench "llama1b_b${b}_q4_k_base" $b --model llama-1b --quantize q4_k
  offline_bench "llama1b_b${b}_q4_k_new" $b --model llama-1b --quantize q4_k
done
decode_step_table
device_pack
