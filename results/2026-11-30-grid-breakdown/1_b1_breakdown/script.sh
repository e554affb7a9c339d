#!/usr/bin/env bash
# Session 38 call 1: the owed GPU tests of dc346db, then where llama-8b's batch-1 Q4_K step goes.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call1
step gpu_test_cuda_gemv_quant 150 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 60 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_batch_invariance 120 "$B/gpu_test_cuda_batch_invariance"
cp "$SUMMARY" "$OUT/tests_summary.txt"
MODELS=llama-8b WEIGHTS="q4_k bf16" SKIPS="attention gemv" bash scripts/device/b1_breakdown_device.sh
cat "$OUT/tests_summary.txt" >>"$SUMMARY"
