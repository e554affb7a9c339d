#!/usr/bin/env bash
# The real SmolLM2 Q4_1 GGUF with the tensor-core cluster attention, after scripts/model_parts.sh
# staged and joined it in /tmp/rose-model (calls 1-4 carry one part each and run `stage K`, the
# 4th also `join`; this call carries bundle-pack/ with roseinfer and gpu_test_cuda_real_quantized):
# its GPU-against-CPU test, and batch-1 decode with both attention kernels
# (ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0: the scalar one), kept blocks and bf16.
set -uo pipefail
OUT=${OUT:-/tmp/real_attention}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
MODEL=/tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -f $MODEL ]] || { echo "no model: run scripts/model_parts.sh stage 1..4 and join first"; exit 1; }
ROSEINFER_MODEL_CACHE=$(dirname "$MODEL") step gpu_test_cuda_real_quantized 240 \
  "$B/gpu_test_cuda_real_quantized" -s
grep -iE "greedy|agree|worst|part" "$OUT/gpu_test_cuda_real_quantized.txt" | head -20 | tee -a "$SUMMARY"
for round in 1 2; do
  offline_bench "r${round}_smollm2_q4_1_mma" 1 --model "$MODEL"
  offline_bench "r${round}_smollm2_q4_1_scalar" 1 ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0 --model "$MODEL"
  offline_bench "r${round}_smollm2_bf16_mma" 1 --model "$MODEL" --dtype bf16
  offline_bench "r${round}_smollm2_bf16_scalar" 1 ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0 --model "$MODEL" --dtype bf16
done
device_pack
cat "$SUMMARY"
