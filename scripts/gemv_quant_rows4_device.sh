#!/usr/bin/env bash
# Whether the direct Q4_K GEMV should also take 3-4 rows (issue 12), on the GPU machine
# (bundle-pack/ carried: roseinfer, gpu_bench_gemv_quant, gpu_test_cuda_gemv_quant). One binary:
# ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=4 sends 3-4 rows to the direct kernel (compiled for 4),
# =2 to the staged kernel (when this ran, 2 was the default; 4 is now). Steps: the GEMV tests with it set (every n against the 8-row
# launch, bit for bit); the kernel bench at 4 rows both ways; offline decode at batch 3 and 4 of
# llama-1b and llama-8b `--quantize q4_k`, both ways. $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/gemv_quant_rows4}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
step gpu_test_cuda_gemv_quant_rows4 300 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=4 \
  "$B/gpu_test_cuda_gemv_quant"
declare -A SETTING=([rows2]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=2"
  [rows4]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=4")
for s in rows4 rows2; do
  step "bench_gemv_quant_$s" 200 env ${SETTING[$s]} ROSEINFER_BENCH_TYPES=Q4_K \
    ROSEINFER_BENCH_ROWS=4 "$B/gpu_bench_gemv_quant" --no-skip
  grep -E "^(llama|qkv|o |gate|down|lm_head|  n 4)" "$OUT/bench_gemv_quant_$s.txt" |
    sed "s/^/$s: /" | tee -a "$SUMMARY"
done
for batch in 4 3; do
  for model in llama-1b llama-8b; do
    for s in rows4 rows2; do
      name="${model}_q4k_b${batch}_$s"
      step "$name" 150 env ${SETTING[$s]} "$B/roseinfer" bench --device cuda --mode offline \
        --max-num-seqs 256 --max-num-batched-tokens 16384 --max-model-len 4096 --model $model \
        --quantize q4_k --dataset-name "grid:$batch:512:128" --json "$OUT/$name.json"
      bench_summary "$name" "$OUT/$name.json"
    done
  done
done
device_pack
cat "$SUMMARY"
