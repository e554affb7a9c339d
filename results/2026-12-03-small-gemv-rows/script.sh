#!/usr/bin/env bash
# Session 52, one call on an nvidia-h200 (carry ["bundle-pack"], the bundle of 5950715, the same
# binary as ../2026-12-03-cluster-splits/'s third call): the small models' dense decode products
# at 1-4 rows on the GEMV (up to ROSEINFER_CUDA_GEMV_MAX_ROWS rows, 4 by default for hidden sizes
# under 2,048) or on the tensor-core GEMV (the rows past it, up to 32), two rounds.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/small_gemv_rows
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
for round in 1 2; do
  for spec in "smollm2 /tmp/models/smollm2-shape" "gpt2 gpt2"; do
    read -r tag model <<<"$spec"
    for b in 1 2 3 4; do
      for rows in 4 2 1 0; do
        (( rows >= b )) && [[ $rows != 4 ]] && continue  # the same path as 4 rows
        bench_with "$B/roseinfer" "${tag}_b${b}_gemv${rows}_r$round" "$b" \
          ROSEINFER_CUDA_GEMV_MAX_ROWS=$rows --model "$model"
      done
    done
  done
done
decode_step_table
device_pack
