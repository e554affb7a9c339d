#!/usr/bin/env bash
# The int8 tensor-core GEMV for Q8_0, Q4_0 and Q4_1 too (issue 12), on the GPU machine from the
# repository root with bundle-pack/ carried (roseinfer, roseinfer-base, gpu_test_cuda_gemv_quant,
# gpu_test_cuda_backend, gpu_test_cuda_batch_invariance): the tests, then `--quantize` decode
# beside the previous build (Q4_K only there; Q8_0 and Q4_0 on the dp4a GEMV and tile GEMM) at 8,
# 16 and 32 rows, bf16 beside; one round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/quant_mma_types_out
for t in gpu_test_cuda_gemv_quant gpu_test_cuda_backend gpu_test_cuda_batch_invariance; do
  step "$t" 300 "$B/$t"
done
for b in 8 16 32; do
  offline_bench "llama1b_b${b}_bf16" "$b" --model llama-1b
  for q in q4_k q8_0 q4_0; do
    base_and_new_bench "llama1b_b${b}_$q" "$b" --model llama-1b --quantize "$q"
  done
done
offline_bench llama8b_b16_bf16 16 --model llama-8b
base_and_new_bench llama8b_b16_q8_0 16 --model llama-8b --quantize q8_0
offline_bench gpt2_b16_bf16 16 --model gpt2
base_and_new_bench gpt2_b16_q8_0 16 --model gpt2 --quantize q8_0
device_pack
