#!/usr/bin/env bash
# Experiment (issue 12): per-phase clock64 sums of the cluster attention and one-wave GEMV kernels
# in batch-1 decode (ROSEINFER_CUDA_PHASE_PROBE=1, kernels/cuda/phase_probe.cuh, not kept), beside
# the base binary's step time. bundle-pack/ carried.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/phase_probe
nvidia-smi --query-gpu=clocks.max.sm,clocks.sm,clocks.applications.graphics --format=csv | tee -a "$OUT/device.txt"
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
base_offline_bench smollm2_base 1 --model /tmp/models/smollm2-shape
offline_bench smollm2_probe 1 ROSEINFER_CUDA_PHASE_PROBE=1 --model /tmp/models/smollm2-shape
grep phase_probe "$OUT/smollm2_probe.txt" | tee -a "$SUMMARY"
offline_bench llama-1b_probe 1 ROSEINFER_CUDA_PHASE_PROBE=1 --model llama-1b
grep phase_probe "$OUT/llama-1b_probe.txt" | tee -a "$SUMMARY"
offline_bench llama-1b_q4k_probe 1 ROSEINFER_CUDA_PHASE_PROBE=1 --model llama-1b --quantize q4_k
grep phase_probe "$OUT/llama-1b_q4k_probe.txt" | tee -a "$SUMMARY"
nvidia-smi --query-gpu=clocks.sm --format=csv | tee -a "$SUMMARY"
device_pack
cat "$SUMMARY"
