#!/usr/bin/env bash
# Batch-1 dense GEMV block size (EXPERIMENT): the same bench with the one-wave kernel's thread
# blocks at 4 (default), 8 or 16 warps, with (5, 9, 17: at most 64 registers, 32 warps an SM) or
# without a minimum of resident blocks (ROSEINFER_CUDA_GEMV_WAVE_WARPS), and the grid kernel's at
# 4, 8 or 16 (ROSEINFER_CUDA_GEMV_WARPS), rounds interleaved. bundle-pack/ carried.
set -uo pipefail
OUT=${OUT:-/tmp/gemv_block_warps}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
S=/tmp/models/smollm2-shape
for r in 1 2 3; do
  for v in 4:4 5:4 9:4 5:8 5:16; do
    w=${v%:*} g=${v#*:}
    offline_bench "smol_wave${w}_grid${g}_r$r" 1 ROSEINFER_CUDA_GEMV_WAVE_WARPS=$w ROSEINFER_CUDA_GEMV_WARPS=$g --model $S
  done
done
for m in gpt2 llama-1b; do
  for w in 4 5; do
    offline_bench "${m}_wave$w" 1 ROSEINFER_CUDA_GEMV_WAVE_WARPS=$w --model $m
  done
done
device_pack
