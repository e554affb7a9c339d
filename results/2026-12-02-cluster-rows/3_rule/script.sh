#!/usr/bin/env bash
# Session 48, call 4 (nvidia-h200; carry bundle-pack): the limit by model
# (cluster_attention_max_rows: 8 rows for GQA models at least 512 KV features wide, 16 otherwise),
# after call 3 found SmolLM2-135M's shape 19-24% slower on the rows kernel at 10-16 rows. Each cell
# on the rule and with ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 (before) or =8 in one binary.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-rule
step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
BIN=$B/roseinfer
trio() {  # NAME BATCH ARGS...
  local name=$1 b=$2
  shift 2
  bench_with "$BIN" "${name}_b${b}_rule" "$b" "$@"
  bench_with "$BIN" "${name}_b${b}_16" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 "$@"
  bench_with "$BIN" "${name}_b${b}_8" "$b" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=8 "$@"
}
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for b in 12 16; do
  trio smollm2 $b --model /tmp/models/smollm2-shape
  trio llama1b_bf16 $b --model llama-1b
  trio llama8b_bf16 $b --model llama-8b
  trio gpt2 $b --model gpt2
done
decode_step_table
device_pack
