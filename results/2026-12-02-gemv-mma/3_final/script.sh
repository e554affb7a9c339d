#!/usr/bin/env bash
# Session 47, call 5 (nvidia-h200; carry bundle-pack): the kept form of the tensor-core GEMV (one
# block a tile of 32 features, no cluster split: call 4's split lost on every shape it touched),
# taken by models under hidden size 2,048 at 5-32 rows. GPU tests; gpu_bench_gemv_mma on gpt2's and
# SmolLM2-135M's products; then bench cells back to back: the default, one row tile a block
# (ROSEINFER_CUDA_GEMV_MMA_ROW_TILES=1) and cuBLAS (ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0), on gpt2 and
# on a random checkpoint of SmolLM2-135M's shape (scripts/make_smollm2_shape.py); llama-1b at 16
# rows (the GEMV not taken) as the control.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gemv-mma3
gpu_tests
step bench_gemv_mma 200 env ROSEINFER_BENCH_MODELS=gpt2,SmolLM2-135M "$B/gpu_bench_gemv_mma" --no-skip
grep -A6 "one layer" "$OUT/bench_gemv_mma.txt" | tee -a "$SUMMARY"
BIN=$B/roseinfer
trio() {  # NAME BATCH ARGS...
  local name=$1 batch=$2
  shift 2
  bench_with "$BIN" "${name}_mma" "$batch" "$@"
  bench_with "$BIN" "${name}_tiles1" "$batch" ROSEINFER_CUDA_GEMV_MMA_ROW_TILES=1 "$@"
  bench_with "$BIN" "${name}_cublas" "$batch" ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0 "$@"
}
for b in 16 8 5 24 32; do
  trio "gpt2_b$b" "$b" --model gpt2
done
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for b in 16 8 32; do
  trio "smollm2_b$b" "$b" --model /tmp/models/smollm2-shape
done
bench_with "$BIN" llama1b_b16_default 16 --model llama-1b
bench_with "$BIN" llama1b_b16_cublas 16 ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0 --model llama-1b
decode_step_table
device_pack
