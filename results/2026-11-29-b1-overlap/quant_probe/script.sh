#!/usr/bin/env bash
# What the direct quantized GEMV's prologue costs in a batch-1 step (issue 12): llama-1b and
# llama-8b `--quantize q4_k`, ROSEINFER_CUDA_GEMV_QUANT_PROBE=0 (as is), 1 (x written as zeros, not loaded nor quantized),
# 2 (no norm reduction), 3 (neither); outputs wrong, step time real. ROUNDS rounds (default 2).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/gemv_quant_probe
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in llama-1b llama-8b; do
    for probe in ${PROBES:-0 1 2 3}; do
      offline_bench "${model}_q4_k_probe${probe}_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_PROBE="$probe" \
        --model "$model" --quantize q4_k
    done
  done
done
device_pack
cat "$SUMMARY"
