#!/usr/bin/env bash
# Session 48, call 7 (nvidia-h200; carry bundle-pack; the code of ca318e5): does SmolLM2-135M's
# shape, 19-24% faster on the cluster kernel than on the split-KV rows kernel at 10-16 rows, stay
# faster on it past 16 rows? Each cell on the rule (16 rows for it) and with
# ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=256 (the cluster kernel for every decode step), twice.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-smollm2
BIN=$B/roseinfer
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in 1 2; do
  for b in 16 24 32 48 64 128 256; do
    bench_with "$BIN" "r${round}_smollm2_b${b}_rule" "$b" --model /tmp/models/smollm2-shape
    bench_with "$BIN" "r${round}_smollm2_b${b}_cluster" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=256 \
      --model /tmp/models/smollm2-shape
  done
done
decode_step_table
device_pack
