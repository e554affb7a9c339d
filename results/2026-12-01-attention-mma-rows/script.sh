#!/usr/bin/env bash
# The split-KV rows kernel on the tensor cores (default) against its scalar form
# (ROSEINFER_CUDA_ATTENTION_ROWS_MMA=0, the kernel before this change), one binary, one call: the
# GPU tests, then decode benches at 32-256 rows, and the tensor-core prefill kernel's decode path
# (ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=17) beside them. Repository root, bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-mma-rows
gpu_tests
for round in 1 2; do
  for mma in 1 0; do
    v=ROSEINFER_CUDA_ATTENTION_ROWS_MMA=$mma
    offline_bench "r${round}_llama1b_b256_mma$mma" 256 $v --model llama-1b
    offline_bench "r${round}_llama1b_b64_mma$mma" 64 $v --model llama-1b
  done
done
for mma in 1 0; do
  v=ROSEINFER_CUDA_ATTENTION_ROWS_MMA=$mma
  offline_bench "llama1b_b32_mma$mma" 32 $v --model llama-1b
  offline_bench "llama1b_b256_q4k_mma$mma" 256 $v --model llama-1b --quantize q4_k
  offline_bench "llama1b_b64_q4k_mma$mma" 64 $v --model llama-1b --quantize q4_k
  offline_bench "llama8b_b64_mma$mma" 64 $v --model llama-8b
  offline_bench "llama8b_b256_mma$mma" 256 $v --model llama-8b
  offline_bench "gpt2_b256_mma$mma" 256 $v --model gpt2
  offline_bench "gpt2_b64_mma$mma" 64 $v --model gpt2
  step "nano256_llama1b_mma$mma" 150 env $v "$B/roseinfer" bench --device cuda --mode offline \
    --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
    --json "$OUT/nano256_llama1b_mma$mma.json"
  bench_summary "nano256_llama1b_mma$mma" "$OUT/nano256_llama1b_mma$mma.json"
done
offline_bench "llama1b_b256_tc17" 256 ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=17 --model llama-1b
decode_step_table
device_pack
