#!/usr/bin/env bash
# Session 40, call 8: the batch-1 products of >= 4,096 features as one 1024-thread block an SM
# (ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=1024) instead of two 512-thread blocks (512, the
# default): the same warps an SM, x prepared once an SM instead of twice. The GEMV test with
# 1024 (bits against the staged kernel), then batch-1 decode, interleaved rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/direct_1024
step gpu_test_cuda_gemv_quant_1024 300 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=1024 "$B/gpu_test_cuda_gemv_quant"
for round in 1 2; do
  for t in 512 1024; do
    offline_bench "llama8b_b1_q4_k_t${t}_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=$t \
      --model llama-8b --quantize q4_k
  done
done
for t in 512 1024; do
  offline_bench "llama8b_b1_q4_k_m_t$t" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=$t --model llama-8b --quantize q4_k_m
  offline_bench "llama1b_b1_q4_k_t$t" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=$t --model llama-1b --quantize q4_k
done
decode_step_table
device_pack
