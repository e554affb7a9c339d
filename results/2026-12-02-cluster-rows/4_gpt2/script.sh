#!/usr/bin/env bash
# Session 48, call 5 (nvidia-h200; carry bundle-pack): the final rule (8 rows for every model at
# least 512 KV features wide, gpt2 included, after call 4 had gpt2 15-20% faster off the cluster
# kernel at 12-16 rows), and gpt2 at 5-10 rows against =4 (the split-KV kernel from 5 rows) and
# =16; SmolLM2's shape and llama-1b at 12 rows on the rule for the record.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-gpt2
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
BIN=$B/roseinfer
for b in 5 6 8 10 12; do
  bench_with "$BIN" "gpt2_b${b}_rule" "$b" --model gpt2
  bench_with "$BIN" "gpt2_b${b}_4" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=4 --model gpt2
  bench_with "$BIN" "gpt2_b${b}_16" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 --model gpt2
done
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
bench_with "$BIN" smollm2_b12_rule 12 --model /tmp/models/smollm2-shape
bench_with "$BIN" llama1b_b12_rule 12 --model llama-1b
decode_step_table
device_pack
