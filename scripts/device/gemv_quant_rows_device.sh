#!/usr/bin/env bash
# How many rows the direct Q4_K GEMV should take (issue 12), on the GPU machine (bundle-pack/
# carried: roseinfer, gpu_bench_gemv_quant, gpu_test_cuda_gemv_quant). One binary:
# ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=$TRY against =$BASE (2, 4 or 8: the direct kernel's row
# limit; more rows run on the staged kernel). Steps: the GEMV tests with $TRY (every n against the
# 8-row launch, bit for bit); the kernel bench at $TRY rows both ways; offline decode at each of
# $BATCHES of llama-1b and llama-8b `--quantize q4_k`, both ways, and bf16 at the first batch.
# Defaults are the first run's (results/2026-11-25-gemv-quant-direct/rows4): TRY=4 BASE=2
# BATCHES="4 3". $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/gemv_quant_rows}
TRY=${TRY:-4} BASE=${BASE:-2} BATCHES=${BATCHES:-4 3}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step "gpu_test_cuda_gemv_quant_rows$TRY" 300 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=$TRY \
  "$B/gpu_test_cuda_gemv_quant"
for rows in $TRY $BASE; do
  step "bench_gemv_quant_rows$rows" 200 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=$rows \
    ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=$TRY "$B/gpu_bench_gemv_quant" --no-skip
  grep -E "^(llama|qkv|o |gate|down|lm_head|  n $TRY)" "$OUT/bench_gemv_quant_rows$rows.txt" |
    sed "s/^/rows$rows: /" | tee -a "$SUMMARY"
done
first=${BATCHES%% *}
for batch in $BATCHES; do
  for model in llama-1b llama-8b; do
    for rows in $TRY $BASE; do
      offline_bench "${model}_q4k_b${batch}_rows$rows" "$batch" \
        ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=$rows --model $model --max-model-len 4096 --quantize q4_k
    done
    [[ $batch == "$first" ]] && offline_bench "${model}_bf16_b$batch" "$batch" --model $model \
      --max-model-len 4096
  done
done
device_pack
cat "$SUMMARY"
