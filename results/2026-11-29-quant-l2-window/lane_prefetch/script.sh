#!/usr/bin/env bash
# The direct quantized GEMV's L2 window (ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD, issue 12) in one call
# (bundle-pack/ carried; $OUT: summary.txt and outputs.tgz): the quantized GEMV's GPU test (the
# window only asks lines into L2, so the bits must not change), gpu_bench_gemv_quant's Q4_K shapes
# at 1 and 8 rows for each window in AHEADS (default 0 2 4 8; 0 is the kernel before the window),
# then batch-1 decode of llama-1b and llama-8b with `--quantize q4_k` at each window, twice, and at
# batch 8 with windows 0 and 4.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/l2_ahead
AHEADS=${AHEADS:-0 2 4 8}
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
for ahead in $AHEADS; do
  step "kernel_q4_k_ahead$ahead" 120 env ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD="$ahead" \
    ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=1,8 "$B/gpu_bench_gemv_quant" --no-skip
done
for round in 1 2; do
  for model in ${MODELS:-llama-1b llama-8b}; do
    for ahead in $AHEADS; do
      offline_bench "${model}_q4_k_ahead${ahead}_r$round" 1 \
        ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD="$ahead" --model "$model" --quantize q4_k
    done
  done
done
for model in ${MODELS:-llama-1b llama-8b}; do
  for ahead in 0 4; do
    offline_bench "${model}_q4_k_ahead${ahead}_b8" 8 \
      ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD="$ahead" --model "$model" --quantize q4_k
  done
done
device_pack
cat "$SUMMARY"
