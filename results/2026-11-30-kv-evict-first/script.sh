#!/usr/bin/env bash
# Session 41, call 6 (nvidia-h200): the tensor-core cluster decode attention's K/V loads with the
# L2 evict_first policy once a step's cache reads outgrow the L2 (AttentionArgs::kv_evict_first_keys)
# against ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST=0 (never: the plain __ldg loads as before, behind
# a uniform branch), the same binary. The GPU tests that cover it first.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/kv_evict_first
step gpu_test_cuda_kernels 200 "$B/gpu_test_cuda_kernels"
step gpu_test_cuda_backend 200 "$B/gpu_test_cuda_backend"
KV0=ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST=0
for round in 1 2 3; do
  offline_bench "llama8b_b1_q4_k_kv0_r$round" 1 $KV0 --model llama-8b --quantize q4_k
  offline_bench "llama8b_b1_q4_k_r$round" 1 --model llama-8b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_kv0_r$round" 1 $KV0 --model llama-1b --quantize q4_k
  offline_bench "llama1b_b1_q4_k_r$round" 1 --model llama-1b --quantize q4_k
  offline_bench "llama8b_b1_bf16_kv0_r$round" 1 $KV0 --model llama-8b
  offline_bench "llama8b_b1_bf16_r$round" 1 --model llama-8b
done
offline_bench llama1b_b1_bf16 1 --model llama-1b
offline_bench llama8b_b1_q4_k_m_kv0 1 $KV0 --model llama-8b --quantize q4_k_m
offline_bench llama8b_b1_q4_k_m 1 --model llama-8b --quantize q4_k_m
decode_step_table
device_pack
