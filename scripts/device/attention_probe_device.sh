#!/usr/bin/env bash
# What a batch-1 layer's attention costs, in parts (issue 12): MODELS (default llama-8b) in
# WEIGHTS (default "q4_k bf16"), the step as is, with the cluster attention returning right after
# its PDL wait (ROSEINFER_CUDA_ATTENTION_PROBE=1), and with attention left out
# (ROSEINFER_CUDA_SKIP=attention); outputs wrong in the last two, step time real. bundle-pack/
# carried; $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/attention_probe
for model in ${MODELS:-llama-8b}; do
  for weights in ${WEIGHTS:-q4_k bf16}; do
    q=()
    [[ $weights != bf16 ]] && q=(--quantize "$weights")
    offline_bench "${model}_${weights}" 1 --model "$model" "${q[@]}"
    offline_bench "${model}_${weights}_probe1" 1 ROSEINFER_CUDA_ATTENTION_PROBE=1 --model "$model" \
      "${q[@]}"
    offline_bench "${model}_${weights}_skip_attention" 1 ROSEINFER_CUDA_SKIP=attention \
      --model "$model" "${q[@]}"
  done
done
device_pack
cat "$SUMMARY"
