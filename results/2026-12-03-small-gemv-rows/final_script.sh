#!/usr/bin/env bash
# Session 52, last call on an nvidia-h200 (carry ["bundle-pack"]): the commit after 5950715
# (a595d62) with the small models' dense GEMV stopped at 2 rows (gemv_rows_for), one binary. The
# backend and engine GPU tests (a bundle with more test programs was refused by the carry limit;
# the attention kernel tests ran in ../2026-12-03-cluster-splits/ on the same kernels), then the
# new default against the old limit (ROSEINFER_CUDA_GEMV_MAX_ROWS=4) at 1-4 rows, and llama-1b at
# one row.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/small_gemv_final
gpu_tests
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
for spec in "smollm2 /tmp/models/smollm2-shape" "gpt2 gpt2"; do
  read -r tag model <<<"$spec"
  for b in 1 2 3 4; do
    bench_with "$B/roseinfer" "${tag}_b${b}_default" "$b" --model "$model"
    bench_with "$B/roseinfer" "${tag}_b${b}_gemv4" "$b" ROSEINFER_CUDA_GEMV_MAX_ROWS=4 --model "$model"
  done
done
for spec in "llama1b_bf16 --model llama-1b" "llama1b_q4_k --model llama-1b --quantize q4_k"; do
  read -r tag args <<<"$spec"
  # shellcheck disable=SC2086
  bench_with "$B/roseinfer" "${tag}_b1" 1 $args
done
decode_step_table
device_pack
