#!/usr/bin/env bash
# Session 47, call 4 (nvidia-h200; carry bundle-pack): the tensor-core GEMV with `in` split over a
# cluster of up to 8 blocks and 1/2/4 row tiles a block (ROSEINFER_CUDA_GEMV_MMA_ROW_TILES). GPU
# tests; gpu_bench_gemv_mma (each product at 4-32 rows, every row-tile count, beside cuBLAS); then
# bench cells back to back: the rule, four row tiles, and cuBLAS (ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gemv-mma2
gpu_tests
step bench_gemv_mma 200 env ROSEINFER_BENCH_MODELS=llama-1b,llama-8b,gpt2 \
  ROSEINFER_BENCH_ROWS=4,8,16,32 "$B/gpu_bench_gemv_mma" --no-skip
grep -A3 "one layer" "$OUT/bench_gemv_mma.txt" | tee -a "$SUMMARY"
BIN=$B/roseinfer
trio() {  # NAME BATCH ARGS...
  local name=$1 batch=$2
  shift 2
  bench_with "$BIN" "${name}_mma" "$batch" "$@"
  bench_with "$BIN" "${name}_tiles4" "$batch" ROSEINFER_CUDA_GEMV_MMA_ROW_TILES=4 "$@"
  bench_with "$BIN" "${name}_cublas" "$batch" ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0 "$@"
}
for b in 16 32 8; do
  trio "llama8b_b$b" "$b" --model llama-8b
  trio "llama1b_b$b" "$b" --model llama-1b
done
trio gpt2_b16 16 --model gpt2
trio gpt2_b32 32 --model gpt2
decode_step_table
device_pack
