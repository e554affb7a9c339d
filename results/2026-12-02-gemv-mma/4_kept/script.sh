#!/usr/bin/env bash
# Session 47, call 6 (nvidia-h200; carry bundle-pack): the kept build. Call 5's backend test
# caught a decoded copy of a quantized matrix (written by the kernel just before) taken by the
# tensor-core GEMV, whose weight loads come before its PDL wait; dense_gemm now keeps such copies
# on cuBLAS, and one row tile a block is the default. GPU tests (the backend's three times), then
# bench cells back to back, the default against cuBLAS (ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0), on gpt2
# and a random checkpoint of SmolLM2-135M's shape, and gpt2 Q8_0 at 16 rows (a decoded copy).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gemv-mma4
gpu_tests
step gpu_test_cuda_backend_2 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_backend_3 300 "$B/gpu_test_cuda_backend"
BIN=$B/roseinfer
pair() {  # NAME BATCH ARGS...
  local name=$1 batch=$2
  shift 2
  bench_with "$BIN" "${name}_mma" "$batch" "$@"
  bench_with "$BIN" "${name}_cublas" "$batch" ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=0 "$@"
}
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for b in 16 8 5 32; do
  pair "gpt2_b$b" "$b" --model gpt2
  pair "smollm2_b$b" "$b" --model /tmp/models/smollm2-shape
done
pair gpt2_b16_q8_0 16 --model gpt2 --quantize q8_0
pair gpt2_b1 1 --model gpt2
decode_step_table
device_pack
