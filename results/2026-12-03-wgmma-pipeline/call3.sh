#!/usr/bin/env bash
# Session 54 call 3: the final rule (the pipeline only on the wgmma tiles of one block an SM; the
# 32-element types' wide products on the tile GEMM up to 256 rows from 2,048 input features).
# The GPU tests the change touches (the GEMM with and without the pipeline; the backend, the
# engine and batch invariance, which run quantized models through it), then the decode step by
# default and with ROSEINFER_GEMM_QUANT_PIPELINE=0 (the kernel, tile choice and row limits of
# 01496a9) at 64-256 rows, and bf16 beside them.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call3
step gemm_quant_test 240 "$B/gpu_test_cuda_gemm_quant"
step gemm_quant_test_pipeline0 240 env ROSEINFER_GEMM_QUANT_PIPELINE=0 "$B/gpu_test_cuda_gemm_quant"
for t in backend engine batch_invariance; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
cells=()
for q in q4_k q8_0; do
  for b in 64 128 256; do
    cells+=("llama1b_$q $b 512 0 --model llama-1b --quantize $q")
  done
done
switch_cells ROSEINFER_GEMM_QUANT_PIPELINE pipeline "" "${cells[@]}"
for b in 64 128; do
  switch_bench "llama1b_b${b}_p512_bf16" X default "grid:$b:512:128" --model llama-1b
done
switch_cells ROSEINFER_GEMM_QUANT_PIPELINE pipeline "" \
  "llama8b_q4_k 64 512 0 --model llama-8b --quantize q4_k" \
  "llama8b_q8_0 64 512 0 --model llama-8b --quantize q8_0"
switch_bench llama8b_q8_0_b256_p512_pipelinedefault X default grid:256:512:128 --model llama-8b \
  --quantize q8_0
for b in 64 128; do
  switch_bench "llama8b_b${b}_p512_bf16" X default "grid:$b:512:128" --model llama-8b
done
decode_step_table
device_pack
