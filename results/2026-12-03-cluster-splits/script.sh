#!/usr/bin/env bash
# Session 52, one call on an nvidia-h200 (carry ["bundle-pack"]): the tensor-core cluster decode
# attention with 4, 8 (the default) and 16 blocks a cluster (ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS),
# one binary. First the attention kernel tests (every split against the CPU reference), then
# batch-1 decode (grid:1:512:128, and 1:2048:128 for longer contexts) of the models whose step the
# attention is a large part of, the three settings interleaved, two rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster_splits
step gpu_test_attention 300 "$B/gpu_test_cuda_kernels" -tc='*attention*'
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
splits_bench() {  # NAME SPLITS DATASET ARGS...: dataset_bench with ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS unless 8
  local name=$1 value=$2 dataset=$3
  shift 3
  local env_args=()
  [[ $value == 8 ]] || env_args=(ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS="$value")
  dataset_bench "$B/roseinfer" "$name" "$dataset" "${env_args[@]}" "$@"
}
for round in 1 2; do
  for spec in "llama1b_bf16 grid:1:512:128 --model llama-1b" \
    "llama1b_q4_k grid:1:512:128 --model llama-1b --quantize q4_k" \
    "smollm2 grid:1:512:128 --model /tmp/models/smollm2-shape" \
    "gpt2 grid:1:512:128 --model gpt2" \
    "llama8b_q4_k grid:1:512:128 --model llama-8b --quantize q4_k" \
    "smollm2_b8 grid:8:512:128 --model /tmp/models/smollm2-shape" \
    "llama1b_q4_k_ctx2k grid:1:2048:128 --model llama-1b --quantize q4_k" \
    "smollm2_ctx2k grid:1:2048:128 --model /tmp/models/smollm2-shape"; do
    read -r tag dataset args <<<"$spec"
    for splits in 8 4 16; do
      # shellcheck disable=SC2086
      splits_bench "${tag}_s${splits}_r$round" "$splits" "$dataset" $args
    done
  done
done
decode_step_table
device_pack
