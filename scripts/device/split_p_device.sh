#!/usr/bin/env bash
# P split into two bf16 terms in the tensor-core cluster attention, beside 7fe088b's binary
# (bundle/roseinfer-base, one bf16 P), on the H100 after scripts/model_parts.sh staged and joined
# the real SmolLM2 GGUF in /tmp/rose-model: the kernel tests, the real model's GPU-against-CPU
# test (greedy agreement), and batch-1 decode of SmolLM2 (Q4_1 and bf16), gpt2, llama-1b and
# llama-8b Q4_K with both binaries.
set -uo pipefail
OUT=${OUT:-/tmp/split_p}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
MODEL=/tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -f $MODEL ]] || { echo "no model: run scripts/model_parts.sh stage 1..4 and join first"; exit 1; }
step gpu_test_cuda_kernels 200 "$B/gpu_test_cuda_kernels"
ROSEINFER_MODEL_CACHE=/tmp/rose-model step gpu_test_cuda_real_quantized 240 \
  "$B/gpu_test_cuda_real_quantized" -s
grep -E "greedy|worst" "$OUT/gpu_test_cuda_real_quantized.txt" | sed 's/.*MESSAGE: //' | tee -a "$SUMMARY"
pair() {  # NAME ARGS...: batch-1 offline bench, new then base
  local name=$1
  shift
  offline_bench "${name}_new" 1 "$@"
  base_offline_bench "${name}_base" 1 "$@"
}
for round in 1 2; do
  pair "r${round}_smollm2_q4_1" --model "$MODEL"
  pair "r${round}_smollm2_bf16" --model "$MODEL" --dtype bf16
  pair "r${round}_gpt2" --model gpt2
  pair "r${round}_llama-1b" --model llama-1b
  pair "r${round}_llama-8b_q4k" --model llama-8b --quantize q4_k
done
device_pack
cat "$SUMMARY"
