#!/usr/bin/env bash
# The fused norm's row reduction spread over (row, warp) pairs (issue 12), on the H100 with
# bundle-pack/ carried (bundle/roseinfer-base: the previous commit): the fused-norm tests, their
# memcheck, then Q4_K decode of llama-1b and llama-8b at batches 1, 2 and 4 beside the base, and at
# batch 4 with the cap raised (ROSEINFER_CUDA_FUSED_NORM=4).
set -uo pipefail
OUT=${OUT:-/tmp/fused_norm_pairs}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step gpu_test_cuda_gemv_quant 200 "$B/gpu_test_cuda_gemv_quant" -tc="*fused*,*direct kernel*"
step gpu_test_cuda_backend 200 "$B/gpu_test_cuda_backend"
step memcheck_backend_fused 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$B/gpu_test_cuda_backend" -tc="norms fused*"
for batch in 1 2 4; do
  for model in llama-1b llama-8b; do
    offline_bench "${model}_q4k_b${batch}_new" "$batch" --model "$model" --quantize q4_k
    base_offline_bench "${model}_q4k_b${batch}_base" "$batch" --model "$model" --quantize q4_k
  done
done
for model in llama-1b llama-8b; do
  offline_bench "${model}_q4k_b4_cap4" 4 ROSEINFER_CUDA_FUSED_NORM=4 --model "$model" \
    --quantize q4_k
done
device_pack
cat "$SUMMARY"
