#!/usr/bin/env bash
# How many weight bytes the int8 tensor-core GEMV keeps in flight (issue 12): the kernel variants
# of ROSEINFER_CUDA_QUANT_MMA_VARIANT (an experiment switch, Q4_K and bf16 only; 0 the default
# tiling, 1 one tile a block of 16 warps, 2 the default tiling loading two groups ahead, 3 = 1 and
# 2, 4 one tile a block of 8 warps at two blocks an SM), on the GPU machine from the repository
# root with bundle-pack/ carried (roseinfer, gpu_test_cuda_gemv_quant, gpu_bench_gemv_quant_mma):
# per-product timings of each variant (gpu_bench_gemv_quant_mma), llama-1b and llama-8b
# `--quantize q4_k` decode at 8 and 24 rows with each, then the kernel test with each.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/mma_mlp_out
for v in 0 1 2 3 4; do
  step "bench_mma_v$v" 120 env ROSEINFER_CUDA_QUANT_MMA_VARIANT=$v "$B/gpu_bench_gemv_quant_mma" \
    --no-skip
  grep -A5 "one layer" "$OUT/bench_mma_v$v.txt" | sed "s/^/v$v /" | tee -a "$SUMMARY"
done
for model in llama-1b llama-8b; do
  for b in 8 24; do
    offline_bench "${model//-/}_b${b}_bf16" "$b" --model "$model"
    for v in 0 1 2 3 4; do
      offline_bench "${model//-/}_b${b}_q4_k_v$v" "$b" ROSEINFER_CUDA_QUANT_MMA_VARIANT=$v \
        --model "$model" --quantize q4_k
    done
  done
done
for v in 1 2 3 4; do
  step "gpu_test_gemv_quant_mma_v$v" 150 env ROSEINFER_CUDA_QUANT_MMA_VARIANT=$v \
    "$B/gpu_test_cuda_gemv_quant" -tc="int8 tensor-core*"
done
device_pack
