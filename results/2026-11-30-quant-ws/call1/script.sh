#!/usr/bin/env bash
# Session 39 call 1: the warp-specialized tile GEMM (gemm_quant_ws_kernel, shapes "ws 128 n128"
# and "ws 128 n256"): its bits against every other shape (the GEMM test), its time per product
# against the other shapes, decode + cuBLAS and bf16 cuBLAS (the kernel bench), and llama-1b Q4_K
# at 256 rows with the tile GEMM's row limits raised so the decode steps take it (choose_tile sends
# 129..256 rows to ws n256 in this build).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call1
step gemm_quant_test 240 "$B/gpu_test_cuda_gemm_quant"
step bench_kernel 200 env ROSEINFER_BENCH_N=128,256,512 ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 \
  ROSEINFER_BENCH_MODELS=llama-1b,llama-8b ROSEINFER_BENCH_MS=8 "$B/gpu_bench_gemm_quant" --no-skip
offline_bench llama1b_b256_bf16 256 --model llama-1b
offline_bench llama1b_b256_q4_k_default 256 --model llama-1b --quantize q4_k
offline_bench llama1b_b256_q4_k_16_16_256 256 ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,256 \
  --model llama-1b --quantize q4_k
offline_bench llama1b_b256_q4_k_256_256_256 256 ROSEINFER_CUDA_GEMM_QUANT_ROWS=256,256,256 \
  --model llama-1b --quantize q4_k
decode_step_table
device_pack
