#!/usr/bin/env bash
# Session 38 call 6: the tile GEMM's row limits on the H200 (set on shape sweeps in sessions
# 18-22): llama-1b and llama-8b Q4_K decode with ROSEINFER_CUDA_GEMM_QUANT_ROWS=SQUARE,DOWN,WIDE
# forced above the defaults (and WIDE=0: gate|up and lm_head decoded for cuBLAS), beside bf16.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call6
q4k() {  # MODEL B ROWS|default
  local model=$1 b=$2 rows=$3 tag="${1//-/}_b$2_q4_k_${3//,/_}"
  if [[ $rows == default ]]; then
    offline_bench "$tag" "$b" --model "$model" --quantize q4_k
  else
    offline_bench "$tag" "$b" ROSEINFER_CUDA_GEMM_QUANT_ROWS="$rows" --model "$model" --quantize q4_k
  fi
}
for b in 64 128 256; do offline_bench "llama1b_b${b}_bf16" "$b" --model llama-1b; done
for rows in default 64,16,64 16,64,64 64,64,64 16,16,0; do q4k llama-1b 64 "$rows"; done
for rows in default 16,16,128 128,128,128; do q4k llama-1b 128 "$rows"; done
for rows in default 16,16,256 256,256,256; do q4k llama-1b 256 "$rows"; done
offline_bench llama8b_b64_bf16 64 --model llama-8b
for rows in default 64,64,128; do q4k llama-8b 64 "$rows"; done
decode_step_table
device_pack
