#!/usr/bin/env bash
# Three 16-key chunks in flight a warp at head_dim 64 (roseinfer) against two (roseinfer-base,
# the build measured in final/), one call, base then new, two rounds. Repository root,
# bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-three-ahead
for round in 1 2; do
  base_and_new_bench "r${round}_llama1b_b256" 256 --model llama-1b
  base_and_new_bench "r${round}_llama1b_b64" 64 --model llama-1b
done
base_and_new_bench "llama1b_b32" 32 --model llama-1b
base_and_new_bench "llama1b_b256_q4k" 256 --model llama-1b --quantize q4_k
base_and_new_bench "llama8b_b64" 64 --model llama-8b
for bin in roseinfer-base roseinfer; do
  step "nano256_$bin" 150 "$B/$bin" bench --device cuda --mode offline --model llama-1b \
    --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
    --json "$OUT/nano256_$bin.json"
done
decode_step_table
device_pack
