#!/usr/bin/env bash
# Session 38 call 7: llama-1b's wide products (gate|up, lm_head) at 33-64 rows on the tile GEMM
# (the default, up to 64 rows) against decoded for cuBLAS (ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,32:
# the same limits but WIDE 32), Q4_K and Q8_0, two rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call7
for b in 40 48 64; do offline_bench "llama1b_b${b}_bf16" "$b" --model llama-1b; done
for round in 1 2; do
  for run in "q4_k 40" "q4_k 48" "q4_k 64" "q8_0 32" "q8_0 64"; do
    read -r q b <<<"$run"
    offline_bench "llama1b_b${b}_${q}_default_r$round" "$b" --model llama-1b --quantize "$q"
    offline_bench "llama1b_b${b}_${q}_wide32_r$round" "$b" ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,32 \
      --model llama-1b --quantize "$q"
  done
done
decode_step_table
device_pack
