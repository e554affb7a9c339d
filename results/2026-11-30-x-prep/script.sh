#!/usr/bin/env bash
# Session 42, call 1 (nvidia-h200): what the batch-1 quantized GEMV's x preparation costs in the
# step, by leaving parts of it out (experiment.diff: ROSEINFER_EXPERIMENT_XMODE bit 0 skips the
# loads of x, bit 1 its int8 quantization, in quantize_x without the norm input: down and o).
# The outputs of modes 1-3 are wrong; only their times are read.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/x_prep
for round in 1 2; do
  for mode in 0 1 2 3; do
    offline_bench "llama8b_q4_k_mode${mode}_r$round" 1 ROSEINFER_EXPERIMENT_XMODE=$mode \
      --model llama-8b --quantize q4_k
  done
done
for mode in 0 3 0 3; do
  offline_bench "llama1b_q4_k_mode${mode}_$SECONDS" 1 ROSEINFER_EXPERIMENT_XMODE=$mode \
    --model llama-1b --quantize q4_k
done
decode_step_table
device_pack
