#!/usr/bin/env bash
# Session 38 call 10: malformed kernel switches stop the CUDA backend with the variable's name;
# well-formed ones still run (5208277).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call10
for setting in ROSEINFER_CUDA_PDL=yes ROSEINFER_CUDA_GEMV_PREFETCH=12x \
  ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=300; do
  env "$setting" "$B/roseinfer" bench --device cuda --mode offline --model gpt2 \
    --dataset-name grid:1:64:8 >"$OUT/refused.txt" 2>&1
  echo "$setting: exit $? : $(tail -n 1 "$OUT/refused.txt")" | tee -a "$SUMMARY"
done
offline_bench gpt2_b1_pdl0 1 ROSEINFER_CUDA_PDL=0 --model gpt2
offline_bench gpt2_b1 1 --model gpt2
offline_bench gpt2_b1_threads256 1 ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256 --model gpt2 --quantize q4_k
step gpu_test_cuda_kernels 120 "$B/gpu_test_cuda_kernels"
device_pack
