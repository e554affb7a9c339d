#!/usr/bin/env bash
# Session 52, third call on an nvidia-h200 (carry ["bundle-pack"]): the rule as committed (16 blocks
# a cluster past 1,024 keys for steps of at most 16 clusters, rows x KV heads), one binary: the
# backend test, then each cell by the rule and forced to the setting the rule should pick; and
# 3-4 row steps of the small models on the GEMV and on the tensor-core GEMV (the end).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_confirm
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step gpu_test_attention 300 "$B/gpu_test_cuda_kernels" -tc='*attention*'
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
confirm_bench() {  # NAME SPLITS(rule|8|16) DATASET ARGS...: dataset_bench with ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS unless rule
  local name=$1 value=$2 dataset=$3
  shift 3
  local env_args=()
  [[ $value == rule ]] || env_args=(ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS="$value")
  dataset_bench "$B/roseinfer" "$name" "$dataset" "${env_args[@]}" "$@"
}
for spec in "llama1b_q4_k_b1_p512 8 grid:1:512:128 --model llama-1b --quantize q4_k" \
  "llama1b_bf16_b1_p512 8 grid:1:512:128 --model llama-1b" \
  "llama1b_q4_k_b1_p2048 16 grid:1:2048:128 --model llama-1b --quantize q4_k" \
  "llama1b_q4_k_b2_p2048 16 grid:2:2048:128 --model llama-1b --quantize q4_k" \
  "llama1b_q4_k_b4_p2048 8 grid:4:2048:128 --model llama-1b --quantize q4_k" \
  "smollm2_b4_p2048 16 grid:4:2048:128 --model /tmp/models/smollm2-shape" \
  "smollm2_b8_p2048 8 grid:8:2048:128 --model /tmp/models/smollm2-shape"; do
  read -r tag expect dataset args <<<"$spec"
  # shellcheck disable=SC2086
  confirm_bench "${tag}_rule" rule "$dataset" $args
  # shellcheck disable=SC2086
  confirm_bench "${tag}_s$expect" "$expect" "$dataset" $args
done
# Noticed in the second call: SmolLM2's shape took longer a step at 4 rows (1.022 ms) than at 8
# (0.875) at 2,048 keys. Its 3-4 row products run on the GEMV's 4-row kernel, 5-32 rows on the
# tensor-core GEMV: both ways for 3-4 rows (ROSEINFER_CUDA_GEMV_MAX_ROWS=2 sends them to the latter).
for spec in "smollm2 /tmp/models/smollm2-shape" "gpt2 gpt2"; do
  read -r tag model <<<"$spec"
  for b in 3 4; do
    bench_with "$B/roseinfer" "${tag}_b${b}_gemv4" "$b" --model "$model"
    bench_with "$B/roseinfer" "${tag}_b${b}_gemv2" "$b" ROSEINFER_CUDA_GEMV_MAX_ROWS=2 --model "$model"
  done
  bench_with "$B/roseinfer" "${tag}_b8" 8 --model "$model"
done
decode_step_table
device_pack
