#!/usr/bin/env bash
# The kept rule of the staged int8 tensor-core GEMV (Q4_K's weights through shared memory at four
# column tiles, 25-32 rows; fewer rows keep the register path), issue 12, on the GPU machine from
# the repository root with bundle-pack/ carried (roseinfer, gpu_test_cuda_gemv_quant, _backend,
# _batch_invariance): the tests, then llama-1b and llama-8b `--quantize q4_k` decode at 25 and 32
# rows on the kept build with ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED=0 (the register path) and
# without, bf16 beside them (grid:B:512:128).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/mma_staged_final_out
for t in gpu_test_cuda_gemv_quant gpu_test_cuda_backend gpu_test_cuda_batch_invariance; do
  step "$t" 300 "$B/$t"
done
for model in llama-1b llama-8b; do
  tag=${model//-/}
  for b in 25 32; do
    offline_bench "${tag}_b${b}_q4_k_regs" "$b" ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED=0 \
      --model "$model" --quantize q4_k
    offline_bench "${tag}_b${b}_q4_k_staged" "$b" --model "$model" --quantize q4_k
    offline_bench "${tag}_b${b}_bf16" "$b" --model "$model"
  done
done
decode_step_table
device_pack
