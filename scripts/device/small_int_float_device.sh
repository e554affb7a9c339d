#!/usr/bin/env bash
# Integer-to-float conversions by an add and a subtract (small_int_to_float) in the quantized
# GEMVs (issue 12), on the GPU machine from the repository root with bundle-pack/ carried
# (roseinfer, roseinfer-base: the previous build, 1a9fbfa, and gpu_test_cuda_gemv_quant):
# `--quantize q4_k` decode on llama-1b at 1-64 rows and llama-8b at 1-64, base and new side by
# side, with bf16 beside them. One round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/small_int_float_out
step gpu_test_cuda_gemv_quant 400 "$B/gpu_test_cuda_gemv_quant"
q4k_rows_bench llama-1b "1 4 8 16 32 64"
q4k_rows_bench llama-8b "1 8 16 32 64"
device_pack
