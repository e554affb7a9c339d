#!/usr/bin/env bash
# The norms after the dense o and down GEMVs, second form (one fence per block, the last block's
# loads batched), on the H100 after scripts/model_parts.sh staged the real SmolLM2 GGUF in
# /tmp/rose-model (bundle-pack/ carried): the GEMV and fused-norm tests, the real model's
# GPU-against-CPU test (greedy agreement, with the quantized GEMVs' fused norms), then batch-1
# decode with the norms fused (default) and with ROSEINFER_CUDA_FUSED_NORM=0 in alternation:
# llama-1b bf16, SmolLM2 bf16 and Q4_1 (its real weights), two rounds; llama-1b bf16 at batch 4
# and Q4_K at batch 8 (=8: fused there too) once.
set -uo pipefail
OUT=${OUT:-/tmp/norm_after_real}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
MODEL=$(scripts/model_parts.sh join) || MODEL=""
step gpu_test_cuda_kernels_gemv 200 "$B/gpu_test_cuda_kernels" -tc="gemv*"
step gpu_test_cuda_backend_norms 200 "$B/gpu_test_cuda_backend" -tc="norms*"
if [[ -n $MODEL ]]; then
  ROSEINFER_MODEL_CACHE=/tmp/rose-model step gpu_test_cuda_real_quantized 240 \
    "$B/gpu_test_cuda_real_quantized" -s
  grep -E "greedy|worst" "$OUT/gpu_test_cuda_real_quantized.txt" | sed 's/.*MESSAGE: //' |
    tee -a "$SUMMARY"
fi
ab() {  # NAME BATCH ARGS...: the default, then the add-norm kernels
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_fused" "$batch" "$@"
  offline_bench "${name}_kernels" "$batch" ROSEINFER_CUDA_FUSED_NORM=0 "$@"
}
for round in 1 2; do
  ab "r${round}_llama-1b_b1" 1 --model llama-1b
  if [[ -n $MODEL ]]; then
    ab "r${round}_smollm2_bf16_b1" 1 --model "$MODEL" --dtype bf16
    ab "r${round}_smollm2_q4_1_b1" 1 --model "$MODEL"
  fi
done
ab llama-1b_b4 4 --model llama-1b
offline_bench llama-1b_q4k_b8_cap4 8 --model llama-1b --quantize q4_k
offline_bench llama-1b_q4k_b8_cap8 8 ROSEINFER_CUDA_FUSED_NORM=8 --model llama-1b --quantize q4_k
device_pack
cat "$SUMMARY"
