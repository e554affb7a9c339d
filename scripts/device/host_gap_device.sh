#!/usr/bin/env bash
# How much of a batch-1 decode step the GPU waits on the host (issue 12), on the H100 with
# bundle-pack/ carried: `roseinfer bench` at batch 1 with ROSEINFER_CUDA_STATS=1, which prints the
# backend's per-step host times (validate, pack + copy of the step's metadata, graph launch, wait
# for the sampled ids); the rest of a step's TPOT is the engine's own work between steps. llama-1b
# bf16 and Q4_K, gpt2, and a random SmolLM2-135M-shaped checkpoint (scripts/make_smollm2_shape.py).
set -uo pipefail
OUT=${OUT:-/tmp/host_gap}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in 1 2; do
  offline_bench "r${round}_llama-1b_bf16" 1 ROSEINFER_CUDA_STATS=1 --model llama-1b
  offline_bench "r${round}_llama-1b_q4k" 1 ROSEINFER_CUDA_STATS=1 --model llama-1b --quantize q4_k
  offline_bench "r${round}_gpt2" 1 ROSEINFER_CUDA_STATS=1 --model gpt2
  offline_bench "r${round}_smollm2_bf16" 1 ROSEINFER_CUDA_STATS=1 --model /tmp/models/smollm2-shape
  if [[ ${REPLAY:-0} == 1 ]]; then
    for spec in "llama-1b_bf16:--model llama-1b" "llama-1b_q4k:--model llama-1b --quantize q4_k" \
      "gpt2:--model gpt2" "smollm2_bf16:--model /tmp/models/smollm2-shape"; do
      name=${spec%%:*}
      read -ra args <<<"${spec#*:}"
      offline_bench "r${round}_${name}_replay3" 1 ROSEINFER_CUDA_STATS=1 ROSEINFER_CUDA_REPLAY=3 \
        "${args[@]}"
      offline_bench "r${round}_${name}_nopdl" 1 ROSEINFER_CUDA_STATS=1 ROSEINFER_CUDA_PDL=0 \
        "${args[@]}"
    done
  fi
done
grep -H "cuda stats" "$OUT"/*.txt | sed "s#$OUT/##" | tee -a "$SUMMARY"
device_pack
cat "$SUMMARY"
