#!/usr/bin/env bash
# The int8 tensor-core GEMV's launch rule of 954865e (one weight tile a block at two blocks an SM
# for 1-24 rows, three column tiles at 17-24, four at two blocks an SM from 3,072 rows) against
# the rule before it (roseinfer-base: 954865e with 2b29d1a's gemv_quant_mma.cu), issue 12, on the
# GPU machine from the repository root with bundle-pack/ carried (roseinfer, roseinfer-base,
# gpu_test_cuda_gemv_quant, _backend, _batch_invariance, gpu_bench_gemv_quant_mma): the tests,
# the per-product timings, then llama-1b and llama-8b `--quantize q4_k` decode at 5-32 rows on
# both builds and bf16 beside them (one round, grid:B:512:128).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/mma_rows_rule_out
for t in gpu_test_cuda_gemv_quant gpu_test_cuda_backend gpu_test_cuda_batch_invariance; do
  step "$t" 300 "$B/$t"
done
step bench_mma 120 "$B/gpu_bench_gemv_quant_mma" --no-skip
grep -A5 "one layer" "$OUT/bench_mma.txt" | tee -a "$SUMMARY"
for model in llama-1b llama-8b; do
  for b in 5 8 16 20 24 32; do
    base_and_new_bench "${model//-/}_b${b}_q4_k" "$b" --model "$model" --quantize q4_k
  done
  for b in 8 16 24 32; do
    offline_bench "${model//-/}_b${b}_bf16" "$b" --model "$model"
  done
done
device_pack
