#!/usr/bin/env bash
# Session 47, call 2 (nvidia-h200, right after call 1; carry bundle-pack): issue 12's llama-8b rows
# at 16, 64 and 256 rows in bf16, Q8_0, Q4_0 and Q4_K (quantized at load), the rest of the grid.
set -uo pipefail
[[ -x bundle/roseinfer ]] || { mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz; }
source scripts/device_step.sh
device_begin /tmp/grid8b
BIN=$B/roseinfer
for b in 256 64 16; do
  for q in bf16 q4_k q8_0 q4_0; do
    extra=()
    [[ $q != bf16 ]] && extra=(--quantize "$q")
    bench_with "$BIN" "llama8b_b${b}_$q" "$b" --model llama-8b "${extra[@]}"
  done
done
decode_step_table
device_pack
