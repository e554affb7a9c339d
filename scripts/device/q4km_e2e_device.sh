#!/usr/bin/env bash
# --quantize q4_k_m (llama.cpp's Q4_K_M mix of Q4_K and Q6_K) end to end, on the GPU machine with
# bundle-pack/ (and .peers/, from ../shared/peers) carried: the backend test (q4_k_m on tiny
# against the CPU, beside the single types), then llama-1b and llama-8b decode at batch 1 in bf16,
# q4_k, q4_k_m and q6_k, two rounds in turn, one binary; batch 256 in bf16, q4_k and q4_k_m once;
# and transformers' batch-1 generate on a random llama-1b checkpoint. $OUT: summary.txt,
# outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/q4km_e2e
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
for r in 1 2; do
  for model in llama-1b llama-8b; do
    offline_bench "${model}_bf16_r$r" 1 --model "$model"
    for q in q4_k q4_k_m q6_k; do
      offline_bench "${model}_${q}_r$r" 1 --model "$model" --quantize "$q"
    done
  done
done
for model in llama-1b llama-8b; do
  for q in bf16 q4_k q4_k_m; do
    args=(--model "$model")
    [[ $q != bf16 ]] && args+=(--quantize "$q")
    offline_bench "${model}_${q}_b256" 256 "${args[@]}"
  done
done
peer_b1 llama1b
device_pack
