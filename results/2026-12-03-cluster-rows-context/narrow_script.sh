#!/usr/bin/env bash
# Session 53, call 3 on an nvidia-h200 (carry ["bundle-pack"]: roseinfer and gpu_test_cuda_backend
# with the limits by context as tables, SmolLM2's shape {0: 32, 1,024: 24, 4,096: 8} rows). Call 2
# found SmolLM2's shape's crossing by rows, not by keys alone. The backend test (its new case's
# first steps fitted to the token budget), then the rule (default) against the other kernel forced
# on SmolLM2's cells around it, and llama-1b's 8-row bucket at 2,048 keys as the control.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_rows_narrow
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
cells=(
  # tag batch prompt other-limit args...
  "smollm2 32 1024 32 --model /tmp/models/smollm2-shape"
  "smollm2 24 1024 16 --model /tmp/models/smollm2-shape"
  "smollm2 24 3072 16 --model /tmp/models/smollm2-shape"
  "smollm2 24 4096 32 --model /tmp/models/smollm2-shape"
  "smollm2 16 3072 8 --model /tmp/models/smollm2-shape"
  "smollm2 16 4096 32 --model /tmp/models/smollm2-shape"
  "smollm2 8 4096 4 --model /tmp/models/smollm2-shape"
  "llama1b_q4_k 8 2048 8 --model llama-1b --quantize q4_k"
)
for round in 1 2; do
  switch_cells ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS rows "_r$round" "${cells[@]}"
done
decode_step_table
device_pack
