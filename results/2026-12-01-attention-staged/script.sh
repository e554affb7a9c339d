#!/usr/bin/env bash
# The split-KV rows kernel's K/V through a shared-memory ring (ROSEINFER_CUDA_ATTENTION_ROWS_STAGES
# 2 or 3) against its register path (0, the kernel before this change), one binary, one call:
# the kernel tests (every stage count against the register path's bits), the backend test, then
# decode benches at 32-256 rows. Run from the repository root with bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-staged
step gpu_test_cuda_kernels 300 "$B/gpu_test_cuda_kernels"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
for stages in 0 2 3; do
  s=ROSEINFER_CUDA_ATTENTION_ROWS_STAGES=$stages
  offline_bench "llama1b_b256_bf16_s$stages" 256 $s --model llama-1b
  offline_bench "llama1b_b64_bf16_s$stages" 64 $s --model llama-1b
  offline_bench "gpt2_b256_s$stages" 256 $s --model gpt2
  offline_bench "llama8b_b64_bf16_s$stages" 64 $s --model llama-8b
done
for stages in 0 2; do
  s=ROSEINFER_CUDA_ATTENTION_ROWS_STAGES=$stages
  offline_bench "llama1b_b256_q4k_s$stages" 256 $s --model llama-1b --quantize q4_k
  offline_bench "llama1b_b64_q4k_s$stages" 64 $s --model llama-1b --quantize q4_k
  offline_bench "llama1b_b32_bf16_s$stages" 32 $s --model llama-1b
  step "nano256_llama1b_s$stages" 150 env $s "$B/roseinfer" bench --device cuda --mode offline \
    --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
    --json "$OUT/nano256_llama1b_s$stages.json"
  bench_summary "nano256_llama1b_s$stages" "$OUT/nano256_llama1b_s$stages.json"
done
# A second round of the main comparison, in the other order.
for stages in 2 0; do
  offline_bench "r2_llama1b_b256_bf16_s$stages" 256 ROSEINFER_CUDA_ATTENTION_ROWS_STAGES=$stages \
    --model llama-1b
done
decode_step_table
device_pack
