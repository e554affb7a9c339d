#!/usr/bin/env bash
# Four column tiles at two blocks an SM where in >= 4096 (202fbd9's default, reverted in f7a299d)
# against the previous build (one block an SM everywhere; roseinfer-base), issue 12, on the GPU
# machine from the repository root with bundle-pack/ carried (roseinfer, roseinfer-base,
# gpu_test_cuda_gemv_quant): llama-1b and llama-8b `--quantize q4_k` decode at 24 and 32 rows.
# One round, grid:B:512:128 (offline_bench).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/mma_two_blocks_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for model in llama-1b llama-8b; do
  for b in 24 32; do
    base_and_new_bench "${model//-/}_b${b}_q4_k" "$b" --model "$model" --quantize q4_k
  done
done
device_pack
