#!/usr/bin/env bash
# Session 54 call 2 (f230943): the pipelined wgmma tiles against the loop before, in one binary
# (ROSEINFER_GEMM_QUANT_PIPELINE=0 also restores the tile choice and the row limits before).
# Kernel: the GEMM test and gpu_bench_gemm_quant at 64-256 rows (five types), both settings.
# Built by scripts/make_bundle.sh without PTX and with the fatbinary uncompressed (the default
# build's roseinfer alone went over the call's 64 MiB). End to end: the decode
# step of llama-1b and llama-8b in Q4_K and Q8_0 at 64, 128 and 256 rows (grid:B:512:128), each
# cell by default then with the switch at 0; bf16 at 256 rows for the ratio.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call2
step gemm_quant_test_pipeline1 240 "$B/gpu_test_cuda_gemm_quant"
step gemm_quant_test_pipeline0 240 env ROSEINFER_GEMM_QUANT_PIPELINE=0 "$B/gpu_test_cuda_gemm_quant"
for p in 1 0; do
  step "bench_pipeline$p" 150 env ROSEINFER_GEMM_QUANT_PIPELINE=$p ROSEINFER_BENCH_N=64,128,256 \
    ROSEINFER_BENCH_MODELS=llama-1b,llama-8b ROSEINFER_BENCH_MS=6 "$B/gpu_bench_gemm_quant" --no-skip
done
cells=()
for q in q8_0 q4_k; do
  for b in 256 128 64; do
    cells+=("llama1b_$q $b 512 0 --model llama-1b --quantize $q")
  done
done
switch_cells ROSEINFER_GEMM_QUANT_PIPELINE pipeline "" "${cells[@]}"
switch_bench llama1b_b256_p512_bf16 X default grid:256:512:128 --model llama-1b
cells=()
for q in q8_0 q4_k; do
  for b in 256 128; do
    cells+=("llama8b_$q $b 512 0 --model llama-8b --quantize $q")
  done
done
switch_cells ROSEINFER_GEMM_QUANT_PIPELINE pipeline "" "${cells[@]}"
switch_bench llama8b_b256_p512_bf16 X default grid:256:512:128 --model llama-8b
decode_step_table
device_pack
