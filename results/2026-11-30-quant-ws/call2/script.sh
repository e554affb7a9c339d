#!/usr/bin/env bash
# Session 39 call 2: call 1 again after the producers' decode was split into all loads first,
# then all stores (call 1's kernel was ~3x slower than its tensor-core bound).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call2
step gemm_quant_test 240 "$B/gpu_test_cuda_gemm_quant"
step bench_kernel 200 env ROSEINFER_BENCH_N=128,256,512 ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 \
  ROSEINFER_BENCH_MODELS=llama-1b,llama-8b ROSEINFER_BENCH_MS=8 "$B/gpu_bench_gemm_quant" --no-skip
offline_bench llama1b_b256_q4_k_16_16_256 256 ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,256 \
  --model llama-1b --quantize q4_k
offline_bench llama1b_b256_q4_k_256_256_256 256 ROSEINFER_CUDA_GEMM_QUANT_ROWS=256,256,256 \
  --model llama-1b --quantize q4_k
decode_step_table
device_pack
