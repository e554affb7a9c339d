#!/usr/bin/env bash
# --quantize q6_k end to end, on the GPU machine with bundle-pack/ (and .peers/, from
# ../shared/peers) carried: the backend test (--quantize q6_k on tiny against the CPU), then
# batch-1 decode of llama-1b and llama-8b with Q6_K weights on the staged GEMV
# (ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0) and the direct one, two rounds, one binary; bf16 and Q4_K
# beside them, and transformers' batch-1 generate on a random llama-1b checkpoint.
# $OUT: summary.txt, outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/q6k_e2e}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
for r in 1 2; do
  for model in llama-1b llama-8b; do
    offline_bench "${model}_q6k_staged_r$r" 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0 --model "$model" \
      --quantize q6_k
    offline_bench "${model}_q6k_direct_r$r" 1 --model "$model" --quantize q6_k
  done
done
for model in llama-1b llama-8b; do
  offline_bench "${model}_bf16" 1 --model "$model"
  offline_bench "${model}_q4k" 1 --model "$model" --quantize q4_k
done
peer_b1 llama1b
device_pack
