#!/usr/bin/env bash
# Whether the next kernel's blocks loading their weights beside the current quantized GEMV's
# (issue 12) shortens a batch-1 step: the direct GEMV's grid with fewer blocks per SM than fit
# (ROSEINFER_CUDA_GEMV_QUANT_WAVE, 256-thread blocks, of which 3 fit an SM), against the default
# (512-thread blocks, one an SM, no room beside them), in ROUNDS rounds (default 2); then where the
# batch-1 step goes now (each kernel class left out, ROSEINFER_CUDA_SKIP) for llama-1b bf16 and
# Q4_K and a random SmolLM2-135M-shaped checkpoint in bf16. bundle-pack/ carried; $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/gemv_wave
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in ${MODELS:-llama-1b llama-8b}; do
    offline_bench "${model}_q4_k_default_r$round" 1 --model "$model" --quantize q4_k
    offline_bench "${model}_q4_k_t256_wave2_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256 \
      ROSEINFER_CUDA_GEMV_QUANT_WAVE=2 --model "$model" --quantize q4_k
    offline_bench "${model}_q4_k_t256_wave1_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256 \
      ROSEINFER_CUDA_GEMV_QUANT_WAVE=1 --model "$model" --quantize q4_k
    offline_bench "${model}_q4_k_t256_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256 \
      --model "$model" --quantize q4_k
    offline_bench "${model}_q4_k_late_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_EARLY=0 \
      --model "$model" --quantize q4_k
  done
done
for weights in bf16 q4_k; do
  q=()
  [[ $weights != bf16 ]] && q=(--quantize "$weights")
  offline_bench "llama-1b_${weights}" 1 --model llama-1b "${q[@]}"
  for skip in norm attention gemv; do
    offline_bench "llama-1b_${weights}_skip_$skip" 1 ROSEINFER_CUDA_SKIP="$skip" --model llama-1b \
      "${q[@]}"
  done
done
# The real default model's shape in bf16 (issue 12's 3,000 tok/s target), random weights.
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
offline_bench smollm2-shape_bf16 1 --model /tmp/models/smollm2-shape
for skip in norm attention gemv; do
  offline_bench "smollm2-shape_bf16_skip_$skip" 1 ROSEINFER_CUDA_SKIP="$skip" \
    --model /tmp/models/smollm2-shape
done
offline_bench gpt2_bf16 1 --model gpt2
device_pack
cat "$SUMMARY"
