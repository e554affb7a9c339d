#!/usr/bin/env bash
# Session 41, call 8 (nvidia-h200; call 7 carried roseinfer-base alone): the direct quantized
# GEMV's weight loads also skip L1 (ld.global.L1::no_allocate.L2::cache_hint, StreamHint::load)
# against 31686e7's loads (L2 hint only; roseinfer-base). Batch-1 decode, base then new.
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/l1_no_allocate
for round in 1 2 3; do
  base_and_new_bench "llama8b_b1_q4_k_r$round" 1 --model llama-8b --quantize q4_k
  base_and_new_bench "llama1b_b1_q4_k_r$round" 1 --model llama-1b --quantize q4_k
done
base_and_new_bench llama8b_b1_q4_k_m 1 --model llama-8b --quantize q4_k_m
base_and_new_bench llama8b_b1_q8_0 1 --model llama-8b --quantize q8_0
offline_bench llama8b_b1_bf16 1 --model llama-8b
decode_step_table
device_pack
