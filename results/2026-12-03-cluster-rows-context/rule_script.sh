#!/usr/bin/env bash
# Session 53, call 2 on an nvidia-h200 (carry ["bundle-pack"]: roseinfer and gpu_test_cuda_backend
# with the row limit by context, cluster_attention_max_rows(config, max_context)). The backend test
# (a new case crosses 1,536 keys at 8 rows in graphs), then the rule (default) against the limits
# before it forced (ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=8 on llama shapes, =32 on SmolLM2's
# shape) on the cells it changes, and against the other kernel where it keeps one; SmolLM2's
# shape at cells call 1 left open (8 rows at 2,048-4,096 keys, 16 and 32 rows at 1,536, 24 at 2,048).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_rows_rule
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
cells=(
  # tag batch prompt other-limit args...
  "llama1b_q4_k 8 1536 8 --model llama-1b --quantize q4_k"
  "llama1b_q4_k 8 4096 8 --model llama-1b --quantize q4_k"
  "llama1b_q4_k 8 1024 4 --model llama-1b --quantize q4_k"
  "llama1b_bf16 8 2048 8 --model llama-1b"
  "llama1b_bf16 6 4096 8 --model llama-1b"
  "llama1b_bf16 4 4096 2 --model llama-1b"
  "llama8b_q4_k 8 2048 8 --model llama-8b --quantize q4_k"
  "smollm2 32 2048 32 --model /tmp/models/smollm2-shape"
  "smollm2 16 4096 32 --model /tmp/models/smollm2-shape"
  "smollm2 8 2048 4 --model /tmp/models/smollm2-shape"
  "smollm2 8 4096 4 --model /tmp/models/smollm2-shape"
  "smollm2 16 1536 8 --model /tmp/models/smollm2-shape"
  "smollm2 32 1536 8 --model /tmp/models/smollm2-shape"
  "smollm2 24 2048 32 --model /tmp/models/smollm2-shape"
  "smollm2 32 1024 8 --model /tmp/models/smollm2-shape"
)
for round in 1 2; do
  switch_cells ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS rows "_r$round" "${cells[@]}"
  [[ $SECONDS -gt 420 ]] && break  # one round is enough when the first ran long
done
decode_step_table
device_pack
