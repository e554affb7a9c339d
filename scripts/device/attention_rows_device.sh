#!/usr/bin/env bash
# The cluster attention reading a decode row's context and block-table row without token_seq first
# (issue 12), then the batch-1 status, in one call (bundle-pack/ carried with roseinfer and
# roseinfer-base = the previous commit's build; .peers/ for transformers): the GPU tests in the
# bundle, batch-1 decode base / new (ROUNDS rounds, default 2) on the SmolLM2-135M shape, llama-1b
# bf16 and Q4_K, llama-8b Q4_K once; then scripts/device/b1_status_device.sh into $OUT/status.
# $OUT: summary.txt, outputs.tgz (and status/ with its own).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/attention_rows
gpu_tests
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in smollm2 llama-1b llama-1b_q4k; do
    args=(--model llama-1b)
    [[ $model == smollm2 ]] && args=(--model /tmp/models/smollm2-shape)
    [[ $model == llama-1b_q4k ]] && args+=(--quantize q4_k)
    base_and_new_bench "${model}_r${round}" 1 "${args[@]}"
  done
done
base_and_new_bench llama-8b_q4k 1 --model llama-8b --quantize q4_k
device_pack
STATUS_OUT=$OUT/status
mkdir -p "$STATUS_OUT"
OUT=$STATUS_OUT SKIP_TESTS=1 bash "$(dirname "$0")/b1_status_device.sh" >/dev/null 2>&1
cat "$SUMMARY" "$STATUS_OUT/summary.txt"
