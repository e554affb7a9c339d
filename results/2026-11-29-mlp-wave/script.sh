#!/usr/bin/env bash
# The batch-1 MLP in one launch, its two products met at a grid barrier (issue 12), in one call
# (bundle-pack/ carried with roseinfer and roseinfer-base = the previous commit's build): the GPU
# tests in the bundle, then batch-1 decode of the SmolLM2-135M shape with base, new with
# ROSEINFER_CUDA_MLP_WAVE=0 (the two launches) and new, ROUNDS rounds (default 3); tiny at batch 1
# (its MLP takes the launch too) base / new. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source scripts/device_step.sh
device_begin /tmp/mlp_wave
gpu_tests
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in $(seq 1 "${ROUNDS:-3}"); do
  base_offline_bench "smollm2_r${round}_base" 1 --model /tmp/models/smollm2-shape
  offline_bench "smollm2_r${round}_mlp_wave0" 1 ROSEINFER_CUDA_MLP_WAVE=0 \
    --model /tmp/models/smollm2-shape
  offline_bench "smollm2_r${round}_new" 1 --model /tmp/models/smollm2-shape
done
base_and_new_bench tiny 1 --model tiny
device_pack
cat "$SUMMARY"
