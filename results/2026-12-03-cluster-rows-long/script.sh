#!/usr/bin/env bash
# Session 52, one call on an nvidia-h200 (carry ["bundle-pack"], roseinfer of bfcd73a): measurement
# only, for the next session. The cluster decode attention takes steps of up to 8 rows on llama
# shapes (cluster_attention_max_rows, set at 512-640 keys); past it the split-KV rows kernel runs.
# At 2,048-key rows, is the row limit still right? Default against
# ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=2 at 4 and 8 rows (to the split-KV kernel), and =16 at
# 12 rows (to the cluster kernel).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_rows_long
rows_bench() {  # NAME MAX_ROWS(default|N) DATASET ARGS...: dataset_bench with ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS unless default
  local name=$1 value=$2 dataset=$3
  shift 3
  local env_args=()
  [[ $value == default ]] || env_args=(ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS="$value")
  dataset_bench "$B/roseinfer" "$name" "$dataset" "${env_args[@]}" "$@"
}
cells=()
for model in "llama1b_q4_k --model llama-1b --quantize q4_k" "llama1b_bf16 --model llama-1b"; do
  cells+=("$model 4 default 2" "$model 8 default 2" "$model 12 default 16")
done
cells+=("llama8b_q4_k --model llama-8b --quantize q4_k 4 default 2")
cells+=("llama8b_q4_k --model llama-8b --quantize q4_k 8 default 2")
for cell in "${cells[@]}"; do
  read -r -a words <<<"$cell"
  tag=${words[0]}
  n=${#words[@]}
  b=${words[n - 3]}
  args=("${words[@]:1:n-4}")
  for rows in "${words[n - 2]}" "${words[n - 1]}"; do
    rows_bench "${tag}_b${b}_p2048_rows$rows" "$rows" "grid:$b:2048:128" "${args[@]}"
  done
done
decode_step_table
device_pack
