#!/usr/bin/env bash
# Which dense GEMVs the one-wave kernel (weights before the PDL wait) speeds up at batch 1
# (issue 12): gpt2, llama-1b and a random SmolLM2-135M-shaped checkpoint in bf16, the default grid
# against the wave kernel for the matrices of at most 2, 4, 8 and 16 MiB
# (ROSEINFER_CUDA_GEMV_WAVE_MAX_KIB), for those whose rows its early chunks cover whole (=whole)
# and for all (ROSEINFER_CUDA_GEMV_WAVE=1), in ROUNDS rounds (default 2). bundle-pack/ carried;
# $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/gemv_wave_sizes
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in /tmp/models/smollm2-shape gpt2 llama-1b; do
    name=$(basename "$model")
    offline_bench "${name}_default_r$round" 1 --model "$model"
    for kib in 2048 4096 8192 16384 whole; do
      offline_bench "${name}_wave${kib}_r$round" 1 ROSEINFER_CUDA_GEMV_WAVE_MAX_KIB=$kib \
        --model "$model"
    done
    offline_bench "${name}_wave_all_r$round" 1 ROSEINFER_CUDA_GEMV_WAVE=1 --model "$model"
  done
done
device_pack
cat "$SUMMARY"
