#!/usr/bin/env bash
# Session 38 call 8: call 7's comparison (wide products past 32 rows on the tile GEMM, the
# default, or decoded for cuBLAS: ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,32) on gpt2 (in = 768),
# Q4_K and Q4_K_M at 48 and 64 rows, and llama-1b Q4_K_M at 64, two rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call8
for b in 48 64; do offline_bench "gpt2_b${b}_bf16" "$b" --model gpt2; done
for round in 1 2; do
  for run in "gpt2 q4_k 48" "gpt2 q4_k 64" "gpt2 q4_k_m 64" "llama-1b q4_k_m 64"; do
    read -r m q b <<<"$run"
    tag="${m//-/}_b${b}_${q}"
    offline_bench "${tag}_default_r$round" "$b" --model "$m" --quantize "$q"
    offline_bench "${tag}_wide32_r$round" "$b" ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,32 \
      --model "$m" --quantize "$q"
  done
done
decode_step_table
device_pack
