#!/usr/bin/env bash
# Session 39, dequant-ahead call 1: kept matrices decoded for cuBLAS one product ahead on a side
# stream (engine/backend/cuda/dequant_ahead.h) against the same binary decoding in line
# (ROSEINFER_CUDA_DEQUANT_AHEAD=0), beside bf16; the GPU tests that run the decoded path.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/dqa1
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_batch_invariance 200 "$B/gpu_test_cuda_batch_invariance"
for b in 256 128 64; do
  offline_bench "llama1b_b${b}_bf16" "$b" --model llama-1b
  offline_bench "llama1b_b${b}_q4_k_inline" "$b" ROSEINFER_CUDA_DEQUANT_AHEAD=0 --model llama-1b --quantize q4_k
  offline_bench "llama1b_b${b}_q4_k_ahead" "$b" --model llama-1b --quantize q4_k
done
offline_bench llama1b_b256_q8_0_inline 256 ROSEINFER_CUDA_DEQUANT_AHEAD=0 --model llama-1b --quantize q8_0
offline_bench llama1b_b256_q8_0_ahead 256 --model llama-1b --quantize q8_0
offline_bench llama8b_b256_bf16 256 --model llama-8b
offline_bench llama8b_b256_q4_k_inline 256 ROSEINFER_CUDA_DEQUANT_AHEAD=0 --model llama-8b --quantize q4_k
offline_bench llama8b_b256_q4_k_ahead 256 --model llama-8b --quantize q4_k
decode_step_table
device_pack
