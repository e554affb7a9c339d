#!/usr/bin/env bash
# Session 51, one call on an nvidia-h200 (carry ["bundle-pack"], the bundle of
# results/2026-12-03-h200-main/: roseinfer-base is main's code, e1deb57). Where a batch-1 step of
# main's code goes: the grid:1:512:128 bench with each kernel class left out of the graphed step
# (ROSEINFER_CUDA_SKIP: outputs wrong, step time real), two rounds of the full step.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/b1_skips
for spec in "llama-1b bf16" "llama-1b q4_k" "llama-8b bf16" "gpt2 bf16"; do
  read -r model q <<<"$spec"
  quant=()
  [[ $q == bf16 ]] || quant=(--quantize "$q")
  tag="${model//-/}_$q"
  bench_with "$B/roseinfer-base" "${tag}_full" 1 --model "$model" "${quant[@]}"
  for skip in norm attention gemv norm,attention; do
    bench_with "$B/roseinfer-base" "${tag}_skip_${skip//,/_}" 1 ROSEINFER_CUDA_SKIP="$skip" \
      --model "$model" "${quant[@]}"
  done
  bench_with "$B/roseinfer-base" "${tag}_full_r2" 1 --model "$model" "${quant[@]}"
done
decode_step_table
device_pack
