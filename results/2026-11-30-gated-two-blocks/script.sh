#!/usr/bin/env bash
# Session 40, call 1: the gated product (gate|up with the SiLU epilogue) at one row on the
# 64-register two-block build, its gate and up rows as items of their own
# (ROSEINFER_CUDA_GEMV_QUANT_GATED_TWO_BLOCKS=1), against the one-block build (0, the default):
# the GEMV test (bits), the product alone (gpu_bench_gemv_quant's "silu" line) and batch-1
# decode, interleaved rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gated
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for two in 0 1; do
  step "bench_gemv_two$two" 200 env ROSEINFER_CUDA_GEMV_QUANT_GATED_TWO_BLOCKS=$two \
    ROSEINFER_BENCH_TYPES=Q4_K,Q4_0,Q8_0,Q6_K ROSEINFER_BENCH_ROWS=1 "$B/gpu_bench_gemv_quant" --no-skip
  grep -E "^(llama|SmolLM2|silu|gate)" "$OUT/bench_gemv_two$two.txt" | sed "s/^/two=$two /" >>"$SUMMARY"
done
for round in 1 2; do
  for two in 0 1; do
    offline_bench "llama8b_b1_q4_k_two${two}_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_GATED_TWO_BLOCKS=$two \
      --model llama-8b --quantize q4_k
    offline_bench "llama1b_b1_q4_k_two${two}_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_GATED_TWO_BLOCKS=$two \
      --model llama-1b --quantize q4_k
  done
done
offline_bench llama8b_b1_bf16 1 --model llama-8b
offline_bench llama1b_b1_bf16 1 --model llama-1b
for two in 0 1; do
  for q in q8_0 q4_0; do
    offline_bench "llama1b_b1_${q}_two$two" 1 ROSEINFER_CUDA_GEMV_QUANT_GATED_TWO_BLOCKS=$two \
      --model llama-1b --quantize $q
  done
  offline_bench "llama8b_b1_q4_k_m_two$two" 1 ROSEINFER_CUDA_GEMV_QUANT_GATED_TWO_BLOCKS=$two \
    --model llama-8b --quantize q4_k_m
done
decode_step_table
device_pack
