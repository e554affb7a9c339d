#!/usr/bin/env bash
# Session 40, call 2: the batch-1 cluster attention asks the next products' weights (o, then
# gate|up) into L2 while HBM is otherwise idle (ROSEINFER_CUDA_ATTENTION_L2_PREFETCH=bytes a
# layer; 0, the default, none). Batch-1 decode step against the byte count, interleaved rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/prefetch
for round in 1 2; do
  for bytes in 0 8388608 16777216 33554432; do
    offline_bench "llama8b_b1_q4_k_pf${bytes}_r$round" 1 ROSEINFER_CUDA_ATTENTION_L2_PREFETCH=$bytes \
      --model llama-8b --quantize q4_k
    offline_bench "llama8b_b1_bf16_pf${bytes}_r$round" 1 ROSEINFER_CUDA_ATTENTION_L2_PREFETCH=$bytes \
      --model llama-8b
  done
  for bytes in 0 4194304 8388608 16777216; do
    offline_bench "llama1b_b1_q4_k_pf${bytes}_r$round" 1 ROSEINFER_CUDA_ATTENTION_L2_PREFETCH=$bytes \
      --model llama-1b --quantize q4_k
    offline_bench "llama1b_b1_bf16_pf${bytes}_r$round" 1 ROSEINFER_CUDA_ATTENTION_L2_PREFETCH=$bytes \
      --model llama-1b
  done
done
decode_step_table
device_pack
