#!/usr/bin/env bash
# The direct quantized GEMV keeping two units in flight ahead at 1-2 rows (issue 12), on the GPU
# machine with bundle-pack/ carried (roseinfer, roseinfer-base = the previous commit's build,
# gpu_test_cuda_gemv_quant): the GEMV test (direct against staged, bit for bit), then llama-1b
# decode, base and new in turn: --quantize q4_k at batch 1 (two rounds) and 2, q4_k_m and q8_0 at
# batch 1. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/gemv_ahead
step gpu_test_cuda_gemv_quant 120 "$B/gpu_test_cuda_gemv_quant"
base_and_new_bench llama-1b_q4_k_b1_r1 1 --model llama-1b --quantize q4_k
base_and_new_bench llama-1b_q4_k_b1_r2 1 --model llama-1b --quantize q4_k
base_and_new_bench llama-1b_q4_k_b2 2 --model llama-1b --quantize q4_k
base_and_new_bench llama-1b_q4_k_m_b1 1 --model llama-1b --quantize q4_k_m
base_and_new_bench llama-1b_q8_0_b1 1 --model llama-1b --quantize q8_0
device_pack
