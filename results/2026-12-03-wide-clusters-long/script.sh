#!/usr/bin/env bash
# Session 53, call 5 on an nvidia-h200 (carry ["bundle-pack"]: roseinfer of b020156, the bundle of
# results/2026-12-03-cluster-rows-context/ call 4). Measurement: the 16-block clusters
# (cluster_attention_splits) are taken for at most 16 clusters (rows x KV heads) past 1,024 keys;
# at 2,048 keys they lost from 24 clusters (results/2026-12-03-cluster-splits/). Do they win at
# 24-32 clusters with longer rows? Default (8 blocks there) against
# ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS=16, two rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/wide_clusters_long
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
cells=(
  # tag batch prompt other-splits args...
  "llama1b_q4_k 4 3072 16 --model llama-1b --quantize q4_k"
  "llama1b_q4_k 4 4096 16 --model llama-1b --quantize q4_k"
  "llama1b_q4_k 4 8192 16 --model llama-1b --quantize q4_k"
  "llama1b_bf16 4 4096 16 --model llama-1b"
  "smollm2 8 3072 16 --model /tmp/models/smollm2-shape"
  "smollm2 8 4096 16 --model /tmp/models/smollm2-shape"
)
llama8b="llama8b_q4_k 4 4096 16 --model llama-8b --quantize q4_k"
switch_cells ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS splits _r1 "${cells[@]}" "$llama8b"
switch_cells ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS splits _r2 "${cells[@]}"  # llama-8b once: ~20 s a run
decode_step_table
device_pack
