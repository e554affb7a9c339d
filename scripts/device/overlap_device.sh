#!/usr/bin/env bash
# Overlapped steps (engine.h: step N+1 enqueued before step N's ids reach the host) in one call
# (bundle-pack/ carried with roseinfer and roseinfer-base = the previous commit's build; .peers/
# for transformers' figure): the GPU test programs in the bundle, then batch-1 decode of the
# SmolLM2-135M shape, gpt2, llama-1b bf16 and Q4_K with base, new --no-overlap and new, ROUNDS
# rounds (default 2); batches 8 and 64 new --no-overlap against new; transformers' batch-1 decode
# of the SmolLM2 shape. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/overlap
gpu_tests
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
model_args() {  # MODEL: the bench arguments of one of the models below
  case $1 in
    smollm2) echo --model /tmp/models/smollm2-shape ;;
    llama-1b_q4k) echo --model llama-1b --quantize q4_k ;;
    *) echo --model "$1" ;;
  esac
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in smollm2 gpt2 llama-1b llama-1b_q4k; do
    read -r -a args <<<"$(model_args "$model")"
    base_offline_bench "${model}_r${round}_base" 1 "${args[@]}"
    offline_bench "${model}_r${round}_no_overlap" 1 "${args[@]}" --no-overlap
    offline_bench "${model}_r${round}_new" 1 "${args[@]}"
  done
done
for batch in 8 64; do
  for model in smollm2 llama-1b; do
    read -r -a args <<<"$(model_args "$model")"
    offline_bench "${model}_b${batch}_no_overlap" "$batch" "${args[@]}" --no-overlap
    offline_bench "${model}_b${batch}_new" "$batch" "${args[@]}"
  done
done
peer_decode_b1 smollm2-shape /tmp/models/smollm2-shape
device_pack
cat "$SUMMARY"
