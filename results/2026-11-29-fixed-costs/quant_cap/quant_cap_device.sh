#!/usr/bin/env bash
# EXPERIMENT: which batch-1 direct quantized GEMVs should hold 2 blocks an SM (64 registers):
# ROSEINFER_CUDA_GEMV_QUANT_CAP=0 none, 1 every plain product, 3 plain products with at least as
# many features as the capped grid has warps, 4 plain products of >= 4096 features, 5 the lm_head
# only; llama-1b and llama-8b Q4_K, batch 1, interleaved; the GEMV test with CAP=1 (the capped
# kernels must give the same bits). bundle-pack/ carried.
set -uo pipefail
OUT=${OUT:-/tmp/quant_cap}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
step gemv_quant_test_cap1 300 env ROSEINFER_CUDA_GEMV_QUANT_CAP=1 "$B/gpu_test_cuda_gemv_quant"
for m in llama-8b llama-1b; do
  for c in 0 1 3 4 5; do
    offline_bench "${m}_q4k_cap$c" 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=$c --model $m --quantize q4_k
  done
done
offline_bench llama-8b_q4k_cap0_again 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=0 --model llama-8b --quantize q4_k
offline_bench llama-8b_q4km_cap0 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=0 --model llama-8b --quantize q4_k_m
offline_bench llama-8b_q4km_cap3 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=3 --model llama-8b --quantize q4_k_m
device_pack
