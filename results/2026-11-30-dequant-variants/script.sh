#!/usr/bin/env bash
# Session 38 call 5: the staged decode kernel's variants (ROSEINFER_CUDA_DEQUANT_VARIANT 0-3:
# 4 or 8 groups a thread a chunk, 2-4 chunks a block in flight), bits then speed.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call5
step gpu_test_cuda_dequant 240 "$B/gpu_test_cuda_dequant"
for v in 0 1 2 3; do
  step "bench_dequant_v$v" 120 env ROSEINFER_CUDA_DEQUANT_VARIANT=$v ROSEINFER_BENCH_RUNS=10 \
    "$B/gpu_bench_dequant" --no-skip -tc="*generic vs staged*"
  grep -E "^(qkv|o |gate|down|  Q)" "$OUT/bench_dequant_v$v.txt" | grep -E "Q4_K|Q8_0|Q6_K" | sed "s/^/v$v /" | tee -a "$SUMMARY"
done
offline_bench llama1b_b256_bf16 256 --model llama-1b
offline_bench llama1b_b64_bf16 64 --model llama-1b
for round in 1 2; do
  for v in 0 1 2 3; do
    offline_bench "llama1b_b256_q4_k_v${v}_r$round" 256 ROSEINFER_CUDA_DEQUANT_VARIANT=$v --model llama-1b --quantize q4_k
  done
done
for v in 0 1 2 3; do
  offline_bench "llama1b_b64_q4_k_v$v" 64 ROSEINFER_CUDA_DEQUANT_VARIANT=$v --model llama-1b --quantize q4_k
  offline_bench "llama1b_b256_q8_0_v$v" 256 ROSEINFER_CUDA_DEQUANT_VARIANT=$v --model llama-1b --quantize q8_0
done
decode_step_table
device_pack
