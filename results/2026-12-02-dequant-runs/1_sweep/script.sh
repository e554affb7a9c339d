#!/usr/bin/env bash
# Session 48, call 1 (nvidia-h200; carry bundle-pack): a kept matrix decoded and multiplied in runs
# of output rows (CudaBackend::dequantized_gemm) instead of whole, at batch 256 and 64, against the
# whole-matrix decode of before (ROSEINFER_CUDA_DEQUANT_RUN_KB=0) in one binary; run sizes 4-32
# MiB. Then the 8- and 16-row decode attention on the split-KV tensor-core kernel
# (ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=4) against the default cluster kernel.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/dequant-runs
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_gemm_bucketed 300 "$B/gpu_test_cuda_gemm_bucketed"
BIN=$B/roseinfer
run() { bench_with "$BIN" "$@"; }
run llama1b_b256_bf16 256 --model llama-1b
for kb in 0 4096 8192 16384 32768; do
  run "llama1b_b256_q4_k_kb$kb" 256 ROSEINFER_CUDA_DEQUANT_RUN_KB=$kb --model llama-1b --quantize q4_k
done
for q in q8_0 q4_0; do
  run "llama1b_b256_${q}_kb0" 256 ROSEINFER_CUDA_DEQUANT_RUN_KB=0 --model llama-1b --quantize $q
  run "llama1b_b256_${q}_default" 256 --model llama-1b --quantize $q
done
run llama1b_b64_bf16 64 --model llama-1b
run llama1b_b64_q4_k_kb0 64 ROSEINFER_CUDA_DEQUANT_RUN_KB=0 --model llama-1b --quantize q4_k
run llama1b_b64_q4_k_default 64 --model llama-1b --quantize q4_k
run llama8b_b256_bf16 256 --model llama-8b
run llama8b_b256_q4_k_kb0 256 ROSEINFER_CUDA_DEQUANT_RUN_KB=0 --model llama-8b --quantize q4_k
run llama8b_b256_q4_k_default 256 --model llama-8b --quantize q4_k
for b in 8 16; do
  run "llama1b_b${b}_bf16_attn_default" $b --model llama-1b
  run "llama1b_b${b}_bf16_attn_cluster4" $b ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=4 --model llama-1b
  run "llama8b_b${b}_bf16_attn_default" $b --model llama-8b
  run "llama8b_b${b}_bf16_attn_cluster4" $b ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=4 --model llama-8b
done
# Repeats: the first pair again, for the noise between runs.
run llama1b_b256_q4_k_kb0_again 256 ROSEINFER_CUDA_DEQUANT_RUN_KB=0 --model llama-1b --quantize q4_k
run llama1b_b256_q4_k_default_again 256 --model llama-1b --quantize q4_k
decode_step_table
device_pack
