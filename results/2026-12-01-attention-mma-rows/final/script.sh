#!/usr/bin/env bash
# The kept change (the tensor-core rows kernel for GQA groups of two or more, the scalar rows
# kernel for single heads) against the scalar rows kernel everywhere
# (ROSEINFER_CUDA_ATTENTION_ROWS_MMA=0: the kernels before this change), one binary, one call:
# the GPU tests, then decode at 1-256 rows and nano256. Repository root, bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-mma-final
gpu_tests
for round in 1 2; do
  for mma in 1 0; do
    v=ROSEINFER_CUDA_ATTENTION_ROWS_MMA=$mma
    offline_bench "r${round}_llama1b_b256_mma$mma" 256 $v --model llama-1b
    offline_bench "r${round}_llama1b_b64_mma$mma" 64 $v --model llama-1b
    offline_bench "r${round}_llama1b_b256_q4k_mma$mma" 256 $v --model llama-1b --quantize q4_k
    offline_bench "r${round}_llama1b_b64_q4k_mma$mma" 64 $v --model llama-1b --quantize q4_k
  done
done
for mma in 1 0; do
  v=ROSEINFER_CUDA_ATTENTION_ROWS_MMA=$mma
  offline_bench "llama1b_b32_mma$mma" 32 $v --model llama-1b
  offline_bench "llama1b_b256_q8_0_mma$mma" 256 $v --model llama-1b --quantize q8_0
  offline_bench "llama1b_b256_q4_0_mma$mma" 256 $v --model llama-1b --quantize q4_0
  offline_bench "llama8b_b64_mma$mma" 64 $v --model llama-8b
  offline_bench "llama8b_b256_mma$mma" 256 $v --model llama-8b
  offline_bench "gpt2_b256_mma$mma" 256 $v --model gpt2
  step "nano256_llama1b_mma$mma" 150 env $v "$B/roseinfer" bench --device cuda --mode offline \
    --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
    --json "$OUT/nano256_llama1b_mma$mma.json"
  bench_summary "nano256_llama1b_mma$mma" "$OUT/nano256_llama1b_mma$mma.json"
done
# Batch 1 and 16 run the cluster kernel, whose chunk code moved to attention_tiles.cuh.
offline_bench "llama1b_b1_q4k" 1 --model llama-1b --quantize q4_k
offline_bench "llama1b_b1_bf16" 1 --model llama-1b
offline_bench "llama1b_b16_bf16" 16 --model llama-1b
decode_step_table
device_pack
