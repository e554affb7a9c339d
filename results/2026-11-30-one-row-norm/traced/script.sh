#!/usr/bin/env bash
# Session 40, call 5: the batch-1 quantized GEMV's norm input in one trip to memory
# (norm_quantize_one_row; ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=1, against 0: the general
# prologue), on the traced build of results/2026-11-30-step-timeline (so timeline.py splits each
# product into boundary, preparation and body). The GEMV test first (bits).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/one_row_norm
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for round in 1 2; do
  for on in 1 0; do
    for m in "llama8b --model llama-8b" "llama1b --model llama-1b"; do
      set -- $m
      name=$1
      shift
      offline_bench "${name}_q4_k_norm${on}_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=$on \
        ROSEINFER_CUDA_TRACE_FILE=$OUT/trace_${name}_norm${on}_r$round.txt "$@" --quantize q4_k
      gzip -f "$OUT/trace_${name}_norm${on}_r$round.txt"
    done
  done
done
for on in 1 0; do
  offline_bench "llama8b_q4_k_m_norm$on" 1 ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=$on --model llama-8b --quantize q4_k_m
  offline_bench "llama1b_q8_0_norm$on" 1 ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=$on --model llama-1b --quantize q8_0
done
decode_step_table
device_pack
