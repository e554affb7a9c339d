#!/usr/bin/env bash
# Session 39, last call: the final reader (messages built from the kernels' row bounds) on the GPU
# machine: the backend test, a refused value of each bounded kind, one bench.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/final
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
offline_bench llama1b_b64_q4_k 64 --model llama-1b --quantize q4_k
for var in ROSEINFER_CUDA_GEMV_MAX_ROWS=5 ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS=33 \
  ROSEINFER_CUDA_GEMV_PUSH=9; do
  env "$var" "$B/roseinfer" bench --device cuda --mode offline --dataset-name grid:1:16:4 \
    --model llama-1b >"$OUT/refuse_${var%%=*}.txt" 2>&1
  echo "$var: exit $? $(grep -m1 'error' "$OUT/refuse_${var%%=*}.txt")" | tee -a "$SUMMARY"
done
device_pack
