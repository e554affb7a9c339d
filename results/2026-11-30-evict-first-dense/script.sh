#!/usr/bin/env bash
# Session 41, call 2 (nvidia-h200-x2): evict_first for the dense GEMV's weight loads
# (ROSEINFER_CUDA_GEMV_EVICT_FIRST) and for the cluster decode attention's K/V loads
# (ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST), each against its switch off, in one binary:
#   single/: the GPU tests covering the changed loads, then batch-1 decode on GPU 0;
#   tp_tests/, tp/: the two-GPU test and llama-8b batch 1 at TP=1 and TP=2 with the dense switch on and
#        off (scripts/device/tp_b1_device.sh).
set -uo pipefail
FINAL=$OUT
source scripts/device_step.sh
OUT=$FINAL/single
device_begin "$OUT"
step gpu_test_cuda_kernels 200 "$B/gpu_test_cuda_kernels"
step gpu_test_cuda_backend 200 "$B/gpu_test_cuda_backend"
KV0=ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST=0
DENSE0=ROSEINFER_CUDA_GEMV_EVICT_FIRST=0
for round in 1 2; do
  offline_bench "llama8b_b1_q4_k_r$round" 1 --model llama-8b --quantize q4_k
  offline_bench "llama8b_b1_q4_k_kv0_r$round" 1 $KV0 --model llama-8b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_r$round" 1 --model llama-1b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_kv0_r$round" 1 $KV0 --model llama-1b --quantize q4_k
  for m in llama-8b llama-1b; do
    tag=${m//-/}
    offline_bench "${tag}_b1_bf16_r$round" 1 --model $m
    offline_bench "${tag}_b1_bf16_dense0_r$round" 1 $DENSE0 --model $m
    offline_bench "${tag}_b1_bf16_dense0_kv0_r$round" 1 $DENSE0 $KV0 --model $m
  done
done
offline_bench gpt2_b1_bf16 1 --model gpt2
offline_bench gpt2_b1_bf16_dense0_kv0 1 $DENSE0 $KV0 --model gpt2
decode_step_table
device_pack
OUT=$FINAL/tp_tests
device_begin "$OUT"
step gpu_test_cuda_tensor_parallel 150 "$B/gpu_test_cuda_tensor_parallel"
device_pack
OUT=$FINAL/tp TESTS=0 ROUNDS=2 DEADLINE=100 PROBES="$DENSE0 $DENSE0,$KV0" timeout 170 \
  bash scripts/device/tp_b1_device.sh >/dev/null 2>&1
[[ -f $FINAL/tp/outputs.tgz ]] || (OUT=$FINAL/tp; SUMMARY=$OUT/summary.txt; device_pack)
