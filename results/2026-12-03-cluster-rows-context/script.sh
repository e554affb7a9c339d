#!/usr/bin/env bash
# Session 53, call 1 on an nvidia-h200 (carry ["bundle-pack"], roseinfer of 3ff043c): measurement for
# a row limit of the cluster decode attention by context. Steps of up to 8 rows (the graph bucket
# of 5-8 rows) run the cluster kernel on llama shapes, set at 512-640 keys; at 2,048 keys the
# split-KV rows kernel won at 8 rows (results/2026-12-03-cluster-rows-long/). Where is the
# crossing in context, and does it hold at 6 real rows (padded to 8)? Default against
# ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=4 (the bucket of 8 to the split-KV kernel); SmolLM2's
# shape (limit 32) against =8 at 16 and 32 rows; llama-1b at 4 rows against =2 at 4,096 keys.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_rows_context
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
cells=()
for model in "llama1b_q4_k --model llama-1b --quantize q4_k" "llama1b_bf16 --model llama-1b"; do
  read -r tag args <<<"$model"
  for p in 1024 1536 2048 4096; do
    cells+=("$tag 8 $p 4 $args" "$tag 6 $p 4 $args")
  done
  cells+=("$tag 4 4096 2 $args")
done
for p in 1024 4096; do
  cells+=("llama8b_q4_k 8 $p 4 --model llama-8b --quantize q4_k")
done
for b in 16 32; do
  for p in 2048 4096; do
    cells+=("smollm2 $b $p 8 --model /tmp/models/smollm2-shape")
  done
done
switch_cells ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS rows "" "${cells[@]}"
decode_step_table
device_pack
