#!/usr/bin/env bash
# The direct quantized GEMV with fewer instructions a unit (issue 12): the previous commit's build
# (bundle/roseinfer-base, bundle/gpu_bench_gemv_quant-base) beside this one in one call
# (bundle-pack/ carried; $OUT: summary.txt and outputs.tgz). The quantized GEMV's GPU test (the
# direct kernel against the staged one, bit for bit, every type) and the backend's; each build's
# gpu_bench_gemv_quant at one row (Q4_K, Q6_K, Q4_0) and Q4_K at 8 rows; batch-1 decode of
# llama-1b and llama-8b with `--quantize q4_k`, base then new, ROUNDS rounds (default 2); then one
# round of llama-1b `--quantize q4_0` and llama-8b q4_k at batch 8.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/direct_q4k_lean
for t in gpu_test_cuda_gemv_quant gpu_test_cuda_backend; do
  step "$t" 300 "$B/$t"
done
for build in base new; do
  bin=$B/gpu_bench_gemv_quant
  [[ $build == base ]] && bin=$B/gpu_bench_gemv_quant-base
  step "kernel_b1_$build" 120 env ROSEINFER_BENCH_TYPES=Q4_K,Q6_K,Q4_0 ROSEINFER_BENCH_ROWS=1 \
    "$bin" --no-skip
  step "kernel_q4_k_b8_$build" 120 env ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=8 "$bin" \
    --no-skip
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in llama-1b llama-8b; do
    base_and_new_bench "${model}_q4_k_r$round" 1 --model "$model" --quantize q4_k
  done
done
base_and_new_bench llama-1b_q4_0 1 --model llama-1b --quantize q4_0
base_and_new_bench llama-8b_q4_k_b8 8 --model llama-8b --quantize q4_k
device_pack
cat "$SUMMARY"
