#!/usr/bin/env bash
# Call 2 of 2, made right after tests/script.sh on the same machine: the mma rows kernel and the
# cluster mma kernel with their Q fragment load and warp-state publish moved into shared helpers
# (load_q_fragments, publish_chunk_state; same registers in ptxas) against the previous commit's
# build (roseinfer-base, carried in bundle-base-pack/): a refactor, so the steps should match.
# Repository root.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/chunk-helpers
tar xJf bundle-base-pack/base.tar.xz -C /tmp/chunk-helpers-bundle --strip-components=1
B=/tmp/chunk-helpers-bundle
export LD_LIBRARY_PATH="$B:$LD_LIBRARY_PATH"
"$B/roseinfer-base" --version | tee -a "$OUT/device.txt"
for round in 1 2; do
  base_and_new_bench "r${round}_llama1b_b1" 1 --model llama-1b
  base_and_new_bench "r${round}_llama1b_b1_q4k" 1 --model llama-1b --quantize q4_k
  base_and_new_bench "r${round}_llama1b_b256" 256 --model llama-1b
done
base_and_new_bench "llama1b_b16" 16 --model llama-1b
base_and_new_bench "llama1b_b64" 64 --model llama-1b
base_and_new_bench "llama8b_b1" 1 --model llama-8b
base_and_new_bench "llama8b_b1_q4k" 1 --model llama-8b --quantize q4_k
decode_step_table
device_pack
