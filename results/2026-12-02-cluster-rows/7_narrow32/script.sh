#!/usr/bin/env bash
# Session 48, call 8 (nvidia-h200; carry bundle-pack; binary 3c7744c): the narrow-KV limit of 32
# rows on SmolLM2-135M's shape at 24, 32 and 48 rows, and gpu_test_cuda_engine.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-narrow32
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
BIN=$B/roseinfer
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for b in 24 32 48; do
  bench_with "$BIN" "smollm2_b${b}_rule" "$b" --model /tmp/models/smollm2-shape
done
decode_step_table
device_pack
