#!/usr/bin/env bash
# Session 41, call 1: the direct quantized GEMV's weight loads with an L2 evict_first policy
# (StreamHint, kernels/cuda/l2_hint.cuh) against evict_normal (ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST=0,
# the same binary). The GPU tests that cover the changed loads first.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/evict_first
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
OFF=ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST=0
for round in 1 2; do
  offline_bench "llama8b_b1_q4_k_off_r$round" 1 $OFF --model llama-8b --quantize q4_k
  offline_bench "llama8b_b1_q4_k_on_r$round" 1 --model llama-8b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_off_r$round" 1 $OFF --model llama-1b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_on_r$round" 1 --model llama-1b --quantize q4_k
done
offline_bench llama8b_b1_bf16 1 --model llama-8b
offline_bench llama1b_b1_bf16 1 --model llama-1b
offline_bench llama8b_b1_q4_k_m_off 1 $OFF --model llama-8b --quantize q4_k_m
offline_bench llama8b_b1_q4_k_m_on 1 --model llama-8b --quantize q4_k_m
for q in q8_0 q4_0; do
  offline_bench "llama1b_b1_${q}_off" 1 $OFF --model llama-1b --quantize $q
  offline_bench "llama1b_b1_${q}_on" 1 --model llama-1b --quantize $q
  offline_bench "llama8b_b1_${q}_off" 1 $OFF --model llama-8b --quantize $q
  offline_bench "llama8b_b1_${q}_on" 1 --model llama-8b --quantize $q
done
for b in 8; do
  offline_bench "llama1b_b${b}_q4_k_off" $b $OFF --model llama-1b --quantize q4_k
  offline_bench "llama1b_b${b}_q4_k_on" $b --model llama-1b --quantize q4_k
  offline_bench "llama8b_b${b}_q4_k_off" $b $OFF --model llama-8b --quantize q4_k
  offline_bench "llama8b_b${b}_q4_k_on" $b --model llama-8b --quantize q4_k
done
decode_step_table
device_pack
