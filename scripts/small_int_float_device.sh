#!/usr/bin/env bash
# Integer-to-float conversions by an add and a subtract (small_int_to_float) in the quantized
# GEMVs (issue 12), on the GPU machine from the repository root with bundle-pack/ carried
# (roseinfer, roseinfer-base: the previous build, 1a9fbfa, and gpu_test_cuda_gemv_quant):
# `--quantize q4_k` decode on llama-1b at 1-64 rows and llama-8b at 1-64, base and new side by
# side, with bf16 beside them. One round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/small_int_float_out
step gpu_test_cuda_gemv_quant 400 "$B/gpu_test_cuda_gemv_quant"
for model in llama-1b llama-8b; do
  batches="1 4 8 16 32 64"
  [[ $model == llama-8b ]] && batches="1 8 16 32 64"
  for b in $batches; do
    tag="${model//-/}_b$b"
    offline_bench "${tag}_bf16" "$b" --model "$model"
    base_and_new_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
  done
done
device_pack
