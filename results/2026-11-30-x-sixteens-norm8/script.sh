#!/usr/bin/env bash
# Session 42, call 12 (nvidia-h200; call 11 carried roseinfer-base alone, unpacked into /tmp/base):
# the one-row norm path back on eight elements a thread (quantize_eight), x without the norm input
# kept on two lanes a block (quantize_sixteen), against roseinfer-base (a107565). The GEMV test
# (bits against the staged kernel) first.
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/x_sixteens_norm8
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for round in 1 2; do
  for m in llama-8b llama-1b; do
    tag=${m//-/}
    base_and_new_bench "${tag}_b1_q4_k_r$round" 1 --model $m --quantize q4_k
  done
done
offline_bench llama8b_b1_bf16 1 --model llama-8b
offline_bench llama1b_b1_bf16 1 --model llama-1b
base_and_new_bench llama8b_b1_q4_k_m 1 --model llama-8b --quantize q4_k_m
for q in q8_0 q4_0; do
  base_and_new_bench "llama1b_b1_$q" 1 --model llama-1b --quantize $q
done
decode_step_table
device_pack
