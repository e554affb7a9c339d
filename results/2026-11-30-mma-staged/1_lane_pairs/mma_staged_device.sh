#!/usr/bin/env bash
# The int8 tensor-core GEMV with Q4_K weights staged through shared memory by cp.async (four
# groups a warp in flight) against its register path (one group ahead; the same bits,
# ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED=0), issue 12, on the GPU machine from the repository root
# with bundle-pack/ carried (roseinfer, gpu_test_cuda_gemv_quant, gpu_bench_gemv_quant_mma): the
# kernel test, the per-product timings of both paths, then llama-1b and llama-8b `--quantize q4_k`
# decode at 8-32 rows on both paths (llama-1b two rounds, llama-8b one) and bf16 at 8-32 rows
# beside them (grid:B:512:128).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/mma_staged_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step bench_mma 150 "$B/gpu_bench_gemv_quant_mma" --no-skip
grep -A5 "one layer" "$OUT/bench_mma.txt" | tee -a "$SUMMARY"
for model in llama-1b llama-8b; do
  rounds="1 2"
  [[ $model == llama-8b ]] && rounds=1
  for b in 8 16 24 32; do
    tag="${model//-/}_b${b}"
    for round in $rounds; do
      offline_bench "${tag}_q4_k_regs_r$round" "$b" ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED=0 \
        --model "$model" --quantize q4_k
      offline_bench "${tag}_q4_k_staged_r$round" "$b" --model "$model" --quantize q4_k
    done
    offline_bench "${tag}_bf16" "$b" --model "$model"
  done
done
decode_step_table
device_pack
