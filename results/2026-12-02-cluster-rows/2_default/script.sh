#!/usr/bin/env bash
# Session 48, call 3 (nvidia-h200; carry bundle-pack and .peers): kClusterAttentionMaxRows 16 -> 8,
# the cluster decode attention up to 8 rows and the split-KV tensor-core rows kernel from 9. Each
# cell back to back: the new default and ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 (the old
# one) in one binary, on a random checkpoint of SmolLM2-135M's shape (9 query heads, 3 KV heads,
# head_dim 64; not in call 1), llama-1b and llama-8b; gpu_test_cuda_engine for the end-to-end
# checks at the new limit.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-default
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
BIN=$B/roseinfer
pair() {  # NAME BATCH ARGS...
  local name=$1 b=$2
  shift 2
  bench_with "$BIN" "${name}_b${b}_new" "$b" "$@"
  bench_with "$BIN" "${name}_b${b}_old16" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 "$@"
}
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in 1 2; do
  for b in 8 10 12 16; do
    pair "r${round}_smollm2" $b --model /tmp/models/smollm2-shape
  done
done
for b in 9 12 16; do
  pair llama1b_bf16 $b --model llama-1b
  pair llama8b_bf16 $b --model llama-8b
done
pair llama1b_q4_k 12 --model llama-1b --quantize q4_k
bench_with "$BIN" llama1b_b1_bf16 1 --model llama-1b
decode_step_table
device_pack
