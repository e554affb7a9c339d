#!/usr/bin/env bash
# The add-norm kernel with its loads issued before any use (issue 12), on the GPU machine with
# bundle-pack/ carried (roseinfer, roseinfer-base = the previous commit's build, and the GPU tests
# below): the tests that cover the norm (kernels, backend, batch invariance, all-reduce,
# tensor-parallel on one GPU), then batch-1 decode, base and new in turn, two rounds: gpt2,
# llama-1b and llama-8b in bf16, llama-1b --quantize q4_k (only layer 0's and the final norm are
# kernels there), and llama-1b bf16 at batch 64. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/norm_loads
for t in ${TESTS:-kernels backend batch_invariance all_reduce tensor_parallel}; do
  step "gpu_test_cuda_$t" 200 "$B/gpu_test_cuda_$t"
done
for r in 1 2; do
  for model in gpt2 llama-1b llama-8b; do
    base_and_new_bench "${model}_r$r" 1 --model "$model"
  done
  base_and_new_bench "llama-1b_q4_k_r$r" 1 --model llama-1b --quantize q4_k
done
base_and_new_bench llama-1b_b64 64 --model llama-1b
device_pack
