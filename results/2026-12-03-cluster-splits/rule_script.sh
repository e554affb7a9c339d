#!/usr/bin/env bash
# Session 52, second call on an nvidia-h200 (carry ["bundle-pack"]): the backend's rule for the
# cluster attention's blocks a cluster (16 for steps of up to 4 rows whose longest row has more than
# 1,024 keys, else 8; workspace_plan.h cluster_attention_splits), one binary. Tests first (the
# attention kernels against the CPU reference; the backend against the CPU backend, with decode
# crossing 1,024 keys in graphs), then each cell three ways: the rule (`rule`), and every launch
# forced to 8 (`s8`) or 16 (`s16`) blocks by ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_rule
step gpu_test_attention 300 "$B/gpu_test_cuda_kernels" -tc='*attention*'
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
rule_bench() {  # NAME SPLITS(rule|8|16) DATASET ARGS...: dataset_bench with ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS unless rule
  local name=$1 value=$2 dataset=$3
  shift 3
  local env_args=()
  [[ $value == rule ]] || env_args=(ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS="$value")
  dataset_bench "$B/roseinfer" "$name" "$dataset" "${env_args[@]}" "$@"
}
cells=()
for p in 512 896 1024 1536 2048 4096; do
  cells+=("llama1b_q4_k_b1_p$p grid:1:$p:128 --model llama-1b --quantize q4_k")
  cells+=("smollm2_b1_p$p grid:1:$p:128 --model /tmp/models/smollm2-shape")
done
cells+=("llama1b_bf16_b1_p2048 grid:1:2048:128 --model llama-1b")
cells+=("llama8b_q4_k_b1_p2048 grid:1:2048:128 --model llama-8b --quantize q4_k")
for b in 2 4 8; do
  cells+=("llama1b_q4_k_b${b}_p2048 grid:$b:2048:128 --model llama-1b --quantize q4_k")
  cells+=("smollm2_b${b}_p2048 grid:$b:2048:128 --model /tmp/models/smollm2-shape")
done
for spec in "${cells[@]}"; do
  read -r tag dataset args <<<"$spec"
  for splits in rule 8 16; do
    name="${tag}_s$splits"
    [[ $splits == rule ]] && name="${tag}_rule"
    # shellcheck disable=SC2086
    rule_bench "$name" "$splits" "$dataset" $args
  done
done
decode_step_table
device_pack
