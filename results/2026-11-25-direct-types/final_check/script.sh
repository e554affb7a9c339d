#!/usr/bin/env bash
# Session 21's closing GPU check (H100; bundle-pack/ and .peers/ carried): the GPU test programs
# the session's changes reach that its earlier calls did not run (kernels, batch invariance,
# engine, fixtures, non-finite, dequant, GEMM on kept blocks), then batch-1 decode beside
# transformers 5.17 on random checkpoints of the gpt2 and llama-1b shapes in the same call, and the
# quantized figures of issue 12 (llama-1b / llama-8b, bf16 and Q4_K; llama-1b Q4_0).
set -uo pipefail
OUT=${OUT:-/tmp/s21_final}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
for t in kernels batch_invariance engine fixtures non_finite dequant gemm_quant; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
peer_b1 gpt2 llama1b
offline_bench gpt2_b1 1 --model gpt2
for model in llama-1b llama-8b; do
  offline_bench "${model}_bf16_b1" 1 --model "$model"
  offline_bench "${model}_q4_k_b1" 1 --model "$model" --quantize q4_k
done
offline_bench llama-1b_q4_0_b1 1 --model llama-1b --quantize q4_0
device_pack
cat "$SUMMARY"
