#!/usr/bin/env bash
# Two batch-1 measurements in one call (issue 12), bundle-pack/ carried ($OUT: summary.txt and
# outputs.tgz):
#  - the dense GEMV in one resident wave with its first weight chunks loaded before the PDL wait
#    (ROSEINFER_CUDA_GEMV_WAVE=1) against the default grid: the GEMV kernel tests under the switch,
#    then ROUNDS rounds (default 2) of gpt2, llama-1b, llama-8b and a random SmolLM2-135M-shaped
#    checkpoint in bf16;
#  - what the cluster attention's time is made of: ROSEINFER_CUDA_ATTENTION_PROBE=1 (the kernel
#    returns right after its PDL wait) and =2 (no merge through distributed shared memory).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/gemv_wave_bf16
step gpu_test_kernels_gemv_wave 300 env ROSEINFER_CUDA_GEMV_WAVE=1 "$B/gpu_test_cuda_kernels" \
  --test-case='gemv*'
step gpu_test_kernels_gemv 300 "$B/gpu_test_cuda_kernels" --test-case='gemv*'
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in gpt2 llama-1b /tmp/models/smollm2-shape llama-8b; do
    name=$(basename "$model")
    offline_bench "${name}_default_r$round" 1 --model "$model"
    offline_bench "${name}_wave_r$round" 1 ROSEINFER_CUDA_GEMV_WAVE=1 --model "$model"
  done
done
for model in llama-1b /tmp/models/smollm2-shape; do
  name=$(basename "$model")
  for probe in 1 2; do
    offline_bench "${name}_attention_probe$probe" 1 ROSEINFER_CUDA_ATTENTION_PROBE=$probe \
      --model "$model"
  done
done
for probe in 1 2; do
  offline_bench "llama-1b_q4_k_attention_probe$probe" 1 ROSEINFER_CUDA_ATTENTION_PROBE=$probe \
    --model llama-1b --quantize q4_k
done
device_pack
cat "$SUMMARY"
