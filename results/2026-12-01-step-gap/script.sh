#!/usr/bin/env bash
# What lies between two batch-1 decode steps on the GPU (issue 12): each model's decode step at
# ROSEINFER_CUDA_REPLAY=1 and =3 (each graph replayed three times back to back, so (3 - 1) / 2 is
# one graph's GPU time with no metadata copy or host work before it), with ROSEINFER_CUDA_STATS=1
# (the backend's host times a step). Run from the repository root with bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/step-gap
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in 1 2; do
  for spec in "llama-1b_q4k:--model llama-1b --quantize q4_k" "llama-1b_bf16:--model llama-1b" \
    "gpt2:--model gpt2" "smollm2_bf16:--model /tmp/models/smollm2-shape"; do
    name=${spec%%:*}
    read -ra args <<<"${spec#*:}"
    for replay in 1 3; do
      offline_bench "r${round}_${name}_replay${replay}" 1 ROSEINFER_CUDA_STATS=1 \
        ROSEINFER_CUDA_REPLAY=$replay "${args[@]}"
    done
  done
done
decode_step_table
grep -H "cuda stats" "$OUT"/*.txt | sed "s#$OUT/##" >>"$SUMMARY"
device_pack
