#!/usr/bin/env bash
# Four column tiles at two blocks an SM where out >= 4096 (the default since this commit) against
# the build with one block an SM everywhere (roseinfer-base, 59d860c), issue 12, on the
# GPU machine from the repository root with bundle-pack/ carried (roseinfer, roseinfer-base):
# llama-1b and llama-8b `--quantize q4_k` decode at 24 and 32 rows. One round, grid:B:512:128.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/mma_two_blocks_out_out
for model in llama-1b llama-8b; do
  for b in 24 32; do
    base_and_new_bench "${model//-/}_b${b}_q4_k" "$b" --model "$model" --quantize q4_k
  done
done
device_pack
