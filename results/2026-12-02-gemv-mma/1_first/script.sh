#!/usr/bin/env bash
# Session 47, call 3 (nvidia-h200; carry bundle-pack): the dense tensor-core GEMV for 3-32 rows
# (kernels/cuda/gemv_mma.cu) in one binary, its GPU tests, then each bench cell twice back to back:
# on it (the default) and with ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0 (cuBLAS, the previous path).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gemv-mma
gpu_tests
BIN=$B/roseinfer
pair() {  # NAME BATCH ARGS...
  local name=$1 batch=$2
  shift 2
  bench_with "$BIN" "${name}_mma" "$batch" "$@"
  bench_with "$BIN" "${name}_cublas" "$batch" ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0 "$@"
}
for b in 16 4 8 32 24 3; do
  pair "llama1b_b$b" "$b" --model llama-1b
done
for b in 16 4 8 32; do
  pair "llama8b_b$b" "$b" --model llama-8b
done
pair gpt2_b16 16 --model gpt2
pair gpt2_b8 8 --model gpt2
pair llama1b_b16_q8_0 16 --model llama-1b --quantize q8_0
decode_step_table
device_pack
