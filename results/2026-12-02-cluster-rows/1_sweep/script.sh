#!/usr/bin/env bash
# Session 48, call 2 (nvidia-h200; carry bundle-pack; binary of 9a8f8cc): where the decode
# attention should leave the cluster kernel for the split-KV tensor-core rows kernel. The default
# takes the cluster kernel up to 16 rows (kClusterAttentionMaxRows); ROSEINFER_CUDA_CLUSTER_
# ATTENTION_MAX_ROWS=4 hands rows 5-16 to the rows kernel. Call 1 (results/2026-12-02-dequant-runs)
# had the cluster kernel ahead at 8 rows and behind at 16: this measures 6-16 rows, two rounds of
# bf16 interleaved, on llama-1b and llama-8b, and Q4_K (whose GEMVs are faster, so attention is a
# larger share of the step).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-rows
BIN=$B/roseinfer
run() { bench_with "$BIN" "$@"; }
pair() {  # NAME BATCH ARGS...
  local name=$1 b=$2
  shift 2
  run "${name}_b${b}_cluster" "$b" "$@"
  run "${name}_b${b}_rows" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=4 "$@"
}
for round in 1 2; do
  for b in 6 8 10 12 14 16; do
    pair "r${round}_llama1b_bf16" $b --model llama-1b
    pair "r${round}_llama8b_bf16" $b --model llama-8b
  done
done
for b in 6 8 10 12 14 16; do
  pair llama1b_q4_k $b --model llama-1b --quantize q4_k
done
for b in 8 12 16; do
  pair llama8b_q4_k $b --model llama-8b --quantize q4_k
done
decode_step_table
device_pack
