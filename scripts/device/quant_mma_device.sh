#!/usr/bin/env bash
# The int8 tensor-core GEMV for quantized small batches (issue 12), on the GPU machine from the
# repository root with bundle-pack/ carried (roseinfer, gpu_test_cuda_gemv_quant,
# gpu_test_cuda_backend): its tests, then llama-1b and llama-8b `--quantize q4_k` decode with it
# (the default: 9-32 rows) and without it (ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=33: the
# tile-decoding GEMM), and at 4-8 rows with it in place of the dp4a GEMV (MIN_ROWS=2), beside bf16
# at the same batch; one round, grid:B:512:128 (offline_bench). ROUNDS=2 repeats the benches.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_mma_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
off=ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=33
small=ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=2
for round in $(seq 1 "${ROUNDS:-1}"); do
  for b in 4 8; do
    tag="llama1b_b${b}_r$round"
    offline_bench "${tag}_bf16" "$b" --model llama-1b
    offline_bench "${tag}_q4_k" "$b" --model llama-1b --quantize q4_k
    offline_bench "${tag}_q4_k_mma" "$b" "$small" --model llama-1b --quantize q4_k
  done
  for b in 12 16 32; do
    tag="llama1b_b${b}_r$round"
    [[ $b != 12 ]] && offline_bench "${tag}_bf16" "$b" --model llama-1b
    offline_bench "${tag}_q4_k" "$b" --model llama-1b --quantize q4_k
    offline_bench "${tag}_q4_k_tile" "$b" "$off" --model llama-1b --quantize q4_k
  done
  for b in 16 32; do
    tag="llama8b_b${b}_r$round"
    offline_bench "${tag}_bf16" "$b" --model llama-8b
    offline_bench "${tag}_q4_k" "$b" --model llama-8b --quantize q4_k
    offline_bench "${tag}_q4_k_tile" "$b" "$off" --model llama-8b --quantize q4_k
  done
done
device_pack
