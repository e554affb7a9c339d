#!/usr/bin/env bash
# Call 2 of 2, made right after tests/script.sh on the same machine: the tensor-core rows
# kernel capped at 128 registers at head_dim 64 (four blocks an SM instead of three) against the
# previous commit's build (roseinfer-base, carried in bundle-base-pack/), at 32-256 rows, with
# llama-8b (head_dim 128, same code) as the control. Repository root.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/launch-bounds
tar xJf bundle-base-pack/base.tar.xz -C /tmp/launch-bounds-bundle --strip-components=1
B=/tmp/launch-bounds-bundle
export LD_LIBRARY_PATH="$B:$LD_LIBRARY_PATH"
"$B/roseinfer-base" --version | tee -a "$OUT/device.txt"
for round in 1 2; do
  base_and_new_bench "r${round}_llama1b_b256" 256 --model llama-1b
  base_and_new_bench "r${round}_llama1b_b64" 64 --model llama-1b
  base_and_new_bench "r${round}_llama1b_b256_q4k" 256 --model llama-1b --quantize q4_k
done
base_and_new_bench "llama1b_b32" 32 --model llama-1b
base_and_new_bench "llama1b_b128" 128 --model llama-1b
base_and_new_bench "llama1b_b64_q4k" 64 --model llama-1b --quantize q4_k
base_and_new_bench "llama8b_b64" 64 --model llama-8b
for bin in roseinfer-base roseinfer; do
  step "nano256_llama1b_$bin" 150 "$B/$bin" bench --device cuda --mode offline \
    --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
    --json "$OUT/nano256_llama1b_$bin.json"
  bench_summary "nano256_llama1b_$bin" "$OUT/nano256_llama1b_$bin.json"
done
decode_step_table
device_pack
