#!/usr/bin/env bash
# Session 41, call 3 (nvidia-h200-x2): the committed build (2a839a8: evict_first for the quantized
# and the dense GEMV's weights, K/V loads as before) measured as it ships:
#   single/: the GPU tests, batch-1 decode on GPU 0 in bf16 and Q4_K, and Q4_K with both
#            switches off (the GEMVs as before this session);
#   tp_tests/, tp/: the two-GPU test and llama-8b batch 1 at TP=1 and TP=2 (scripts/device/tp_b1_device.sh).
set -uo pipefail
FINAL=$OUT
source scripts/device_step.sh
OUT=$FINAL/single
device_begin "$OUT"
step gpu_test_cuda_kernels 200 "$B/gpu_test_cuda_kernels"
step gpu_test_cuda_backend 200 "$B/gpu_test_cuda_backend"
OFF=(ROSEINFER_CUDA_GEMV_EVICT_FIRST=0 ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST=0)
for round in 1 2; do
  for m in llama-8b llama-1b; do
    tag=${m//-/}
    offline_bench "${tag}_b1_bf16_r$round" 1 --model $m
    offline_bench "${tag}_b1_q4_k_r$round" 1 --model $m --quantize q4_k
    offline_bench "${tag}_b1_bf16_off_r$round" 1 "${OFF[@]}" --model $m
    offline_bench "${tag}_b1_q4_k_off_r$round" 1 "${OFF[@]}" --model $m --quantize q4_k
  done
done
offline_bench llama8b_b1_q4_k_m 1 --model llama-8b --quantize q4_k_m
offline_bench gpt2_b1_bf16 1 --model gpt2
decode_step_table
device_pack
OUT=$FINAL/tp_tests
device_begin "$OUT"
step gpu_test_cuda_tensor_parallel 150 "$B/gpu_test_cuda_tensor_parallel"
device_pack
OUT=$FINAL/tp TESTS=0 ROUNDS=2 DEADLINE=60 timeout 150 bash scripts/device/tp_b1_device.sh >/dev/null 2>&1
[[ -f $FINAL/tp/outputs.tgz ]] || (OUT=$FINAL/tp; SUMMARY=$OUT/summary.txt; device_pack)
