#!/usr/bin/env bash
# Session 53, call 4 on an nvidia-h200 (carry ["bundle-pack"]: roseinfer and gpu_test_cuda_backend at
# the final limits, SmolLM2's shape {0: 32, 1,024: 24, 3,072: 8} rows). The
# backend test; the rule (default) against the other kernel forced on the cells the last
# change moved and its neighbours; then, measurement only for a later session, how much of a
# long-context step of many rows is the split-KV attention (ROSEINFER_CUDA_SKIP=attention: outputs
# wrong, times real).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_rows_confirm
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
cells=(
  # tag batch prompt other-limit args...
  "smollm2 16 3072 32 --model /tmp/models/smollm2-shape"
  "smollm2 24 3072 32 --model /tmp/models/smollm2-shape"
  "smollm2 16 2048 8 --model /tmp/models/smollm2-shape"
  "smollm2 8 3072 4 --model /tmp/models/smollm2-shape"
  "llama1b_q4_k 8 1536 8 --model llama-1b --quantize q4_k"
  "llama1b_bf16 8 4096 8 --model llama-1b"
)
switch_cells ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS rows "" "${cells[@]}"
for cell in "64 2048" "256 1024" "64 512"; do
  read -r b p <<<"$cell"
  dataset_bench "$B/roseinfer" "llama1b_bf16_b${b}_p${p}_full" "grid:$b:$p:128" --model llama-1b
  dataset_bench "$B/roseinfer" "llama1b_bf16_b${b}_p${p}_skip_attention" "grid:$b:$p:128" \
    ROSEINFER_CUDA_SKIP=attention --model llama-1b
done
decode_step_table
device_pack
