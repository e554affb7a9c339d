#!/usr/bin/env bash
# How far Q4_K_M (whose Q6_K matrices do not take the int8 tensor-core GEMV) falls behind Q4_K at
# 8-32 rows, issue 12, on the GPU machine from the repository root with bundle-pack/ carried
# (roseinfer): llama-1b and llama-8b `--quantize q4_k_m` and `--quantize q4_k` decode at 8, 16 and
# 32 rows (grid:B:512:128), one round.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/q4km_rows_out
for model in llama-1b llama-8b; do
  for b in 8 16 32; do
    for type in q4_k_m q4_k; do
      offline_bench "${model//-/}_b${b}_$type" "$b" --model "$model" --quantize "$type"
    done
  done
done
decode_step_table
device_pack
