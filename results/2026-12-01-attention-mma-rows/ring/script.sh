#!/usr/bin/env bash
# The tensor-core rows kernel's K/V in registers (ROSEINFER_CUDA_ATTENTION_ROWS_MMA_STAGES=0, two
# chunks in flight) against a shared-memory ring of 3 or 4 stages (cp.async), and the scalar rows
# kernel (ROSEINFER_CUDA_ATTENTION_ROWS_MMA=0) beside them; the GPU tests first. One binary, one
# call, repository root, bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-mma-ring
gpu_tests
offline_bench "llama1b_b256_scalar" 256 ROSEINFER_CUDA_ATTENTION_ROWS_MMA=0 --model llama-1b
offline_bench "gpt2_b256_default" 256 --model gpt2
for round in 1 2; do
  for st in 0 3 4; do
    v=ROSEINFER_CUDA_ATTENTION_ROWS_MMA_STAGES=$st
    offline_bench "r${round}_llama1b_b256_st$st" 256 $v --model llama-1b
    offline_bench "r${round}_llama1b_b64_st$st" 64 $v --model llama-1b
  done
done
for st in 0 3 4; do
  v=ROSEINFER_CUDA_ATTENTION_ROWS_MMA_STAGES=$st
  offline_bench "llama1b_b32_st$st" 32 $v --model llama-1b
  offline_bench "llama1b_b256_q4k_st$st" 256 $v --model llama-1b --quantize q4_k
  offline_bench "llama8b_b64_st$st" 64 $v --model llama-8b
  offline_bench "llama8b_b256_st$st" 256 $v --model llama-8b
  step "nano256_llama1b_st$st" 150 env $v "$B/roseinfer" bench --device cuda --mode offline \
    --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
    --json "$OUT/nano256_llama1b_st$st.json"
  bench_summary "nano256_llama1b_st$st" "$OUT/nano256_llama1b_st$st.json"
done
decode_step_table
device_pack
