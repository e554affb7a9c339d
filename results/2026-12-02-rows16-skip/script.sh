#!/usr/bin/env bash
# Session 47, call 8 (nvidia-h200; carry bundle-pack, c84bc52's build): where llama-8b's 16-row bf16
# decode step (5.87 ms against 4.06 at one row) spends the time the GEMMs do not explain. The same
# grid cell with each kernel family left out of every forward (ROSEINFER_CUDA_SKIP: the outputs are
# wrong, the times real), at 1 and 16 rows.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/rows16-skip
BIN=$B/roseinfer
for b in 16 1; do
  bench_with "$BIN" "llama8b_b${b}_full" "$b" --model llama-8b
  for k in attention gemv norm rope; do
    bench_with "$BIN" "llama8b_b${b}_skip_$k" "$b" ROSEINFER_CUDA_SKIP=$k --model llama-8b
  done
done
decode_step_table
device_pack
