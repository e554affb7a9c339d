#!/usr/bin/env bash
# Session 39: the CUDA backend's ROSEINFER_CUDA_* switches read strictly in one place
# (engine/backend/cuda/backend_switches.h). The GPU tests that set them, a few benches with the
# values the scripts use, and malformed values refused with the variable's name and exit 1.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/switches
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_batch_invariance 200 "$B/gpu_test_cuda_batch_invariance"
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
offline_bench llama1b_b256_bf16 256 --model llama-1b
offline_bench llama1b_b256_q4_k 256 --model llama-1b --quantize q4_k
offline_bench llama1b_b1_bf16 1 --model llama-1b
offline_bench llama1b_b1_bf16_replay3 1 ROSEINFER_CUDA_REPLAY=3 --model llama-1b
offline_bench llama1b_b1_bf16_skip_attention 1 ROSEINFER_CUDA_SKIP=attention --model llama-1b
offline_bench llama1b_b64_q4_k_rows 64 ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,0 --model llama-1b --quantize q4_k
offline_bench llama1b_b64_q4_k 64 --model llama-1b --quantize q4_k
step stats_1 120 env ROSEINFER_CUDA_STATS=1 "$B/roseinfer" bench --device cuda --mode offline \
  --dataset-name grid:4:64:16 --model llama-1b
grep "cuda stats" "$OUT/stats_1.txt" | head -1 | tee -a "$SUMMARY"
# Each malformed value: the exit status and the message.
for var in ROSEINFER_CUDA_SKIP=atention ROSEINFER_CUDA_STATS=yes ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16 \
  ROSEINFER_CUDA_GEMV_MAX_ROWS=8 ROSEINFER_CUDA_REPLAY=0; do
  env "$var" "$B/roseinfer" bench --device cuda --mode offline --dataset-name grid:1:16:4 \
    --model llama-1b >"$OUT/refuse_${var%%=*}.txt" 2>&1
  echo "$var: exit $? $(grep -m1 'error' "$OUT/refuse_${var%%=*}.txt")" | tee -a "$SUMMARY"
done
decode_step_table
device_pack
