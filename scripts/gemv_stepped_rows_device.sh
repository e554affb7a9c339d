#!/usr/bin/env bash
# Whether quantized decode batches of 9-32 rows should stay on the quantized GEMV, run as launches
# of 8 rows that each read the whole matrix again (ROSEINFER_CUDA_GEMV_QUANT_MAX_ROWS=64, "stepped"),
# instead of the tile-decoding GEMM the default rule gives them (issue 12). On the GPU machine from
# the repository root with bundle-pack/ carried (roseinfer); one round, grid:B:512:128
# (offline_bench), bf16 at the same batch beside.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/gemv_stepped_out
stepped=ROSEINFER_CUDA_GEMV_QUANT_MAX_ROWS=64
offline_bench llama1b_b8_q4_k 8 --model llama-1b --quantize q4_k
for b in 12 16 24 32; do
  tag="llama1b_b$b"
  [[ $b == 16 || $b == 32 ]] && offline_bench "${tag}_bf16" "$b" --model llama-1b
  offline_bench "${tag}_q4_k" "$b" --model llama-1b --quantize q4_k
  offline_bench "${tag}_q4_k_stepped" "$b" "$stepped" --model llama-1b --quantize q4_k
done
offline_bench llama1b_b16_q4_0 16 --model llama-1b --quantize q4_0
offline_bench llama1b_b16_q4_0_stepped 16 "$stepped" --model llama-1b --quantize q4_0
offline_bench llama1b_b16_q8_0 16 --model llama-1b --quantize q8_0
offline_bench llama1b_b16_q8_0_stepped 16 "$stepped" --model llama-1b --quantize q8_0
for b in 16 32; do
  tag="llama8b_b$b"
  [[ $b == 16 ]] && offline_bench "${tag}_bf16" "$b" --model llama-8b
  offline_bench "${tag}_q4_k" "$b" --model llama-8b --quantize q4_k
  offline_bench "${tag}_q4_k_stepped" "$b" "$stepped" --model llama-8b --quantize q4_k
done
device_pack
