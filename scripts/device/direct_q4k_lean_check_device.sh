#!/usr/bin/env bash
# The leaner direct-GEMV loop kept for Q4_K only, checked in one call beside the previous commit's
# build (bundle/roseinfer-base; bundle-pack/ carried; $OUT: summary.txt and outputs.tgz): the
# quantized GEMV's GPU test, then llama-1b `--quantize q4_0` and `q4_k` batch-1 decode base / new,
# ROUNDS rounds (default 2), and llama-8b q4_k once.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/direct_q4k_lean_check
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for round in $(seq 1 "${ROUNDS:-2}"); do
  base_and_new_bench "llama-1b_q4_0_r$round" 1 --model llama-1b --quantize q4_0
  base_and_new_bench "llama-1b_q4_k_r$round" 1 --model llama-1b --quantize q4_k
done
base_and_new_bench llama-8b_q4_k 1 --model llama-8b --quantize q4_k
device_pack
cat "$SUMMARY"
