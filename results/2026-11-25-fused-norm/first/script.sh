#!/usr/bin/env bash
# The norms fused into the decode GEMVs and the dense GEMV's weights loaded before the PDL wait
# (issue 12), on the H100 with bundle-pack/ carried (bundle/roseinfer-base: the previous commit):
# the GPU tests that cover them, then batch-1 decode (and batch 4 / 8) with the new binary in its
# three settings (default; ROSEINFER_CUDA_FUSED_NORM=0; that and ROSEINFER_CUDA_GEMV_EARLY=0) and
# with the base binary, alternating. ROUNDS (default 1) rounds at batch 1; EXTRA=1 adds llama-8b
# bf16 and batches 4 / 8; SKIP_TESTS=1 leaves the tests out (a second call).
set -uo pipefail
OUT=${OUT:-/tmp/fused_norm}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
if [[ ${SKIP_TESTS:-0} != 1 ]]; then
  step gpu_test_cuda_kernels 200 "$B/gpu_test_cuda_kernels"
  step gpu_test_cuda_gemv_quant 200 "$B/gpu_test_cuda_gemv_quant"
  step gpu_test_cuda_backend 200 "$B/gpu_test_cuda_backend"
  step gpu_test_cuda_batch_invariance 200 "$B/gpu_test_cuda_batch_invariance"
fi
four() {  # NAME BATCH ARGS...: new (3 settings) then base
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_fused" "$batch" "$@"
  offline_bench "${name}_unfused" "$batch" ROSEINFER_CUDA_FUSED_NORM=0 "$@"
  offline_bench "${name}_late" "$batch" ROSEINFER_CUDA_FUSED_NORM=0 ROSEINFER_CUDA_GEMV_EARLY=0 "$@"
  base_offline_bench "${name}_base" "$batch" "$@"
}
for round in $(seq 1 "${ROUNDS:-1}"); do
  four "r${round}_llama-1b_b1" 1 --model llama-1b
  four "r${round}_llama-1b_q4k_b1" 1 --model llama-1b --quantize q4_k
  four "r${round}_llama-8b_q4k_b1" 1 --model llama-8b --quantize q4_k
  four "r${round}_gpt2_b1" 1 --model gpt2
done
if [[ ${EXTRA:-0} == 1 ]]; then
  four "llama-8b_b1" 1 --model llama-8b
  four "llama-1b_b4" 4 --model llama-1b
  four "llama-1b_q4k_b8" 8 --model llama-1b --quantize q4_k
  four "llama-8b_q4k_b8" 8 --model llama-8b --quantize q4_k
fi
device_pack
cat "$SUMMARY"
