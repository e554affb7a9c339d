#!/usr/bin/env bash
# Q4_K's bulk-copy GEMV (gemv_quant.cu: each warp's weight spans streamed into a shared-memory ring
# by the copy engine) against the direct kernel, in one call (bundle-pack/ carried with roseinfer,
# gpu_bench_gemv_quant and the GPU tests). One binary: ROSEINFER_CUDA_GEMV_QUANT_BULK=0 is the
# direct kernel, ROSEINFER_CUDA_GEMV_QUANT_STAGES=N the ring depth (4 when unset).
# Steps: the GEMV, engine and batch-invariance GPU tests; the kernel bench at llama-1b / llama-8b
# shapes (Q4_K, 1 and 8 rows) per setting; offline decode of llama-1b and llama-8b `--quantize
# q4_k` at batch 1 (ROUNDS rounds, default 2) and batch 8, direct then bulk, with bf16 beside
# them; compute-sanitizer memcheck of the GEMV tests that run the bulk kernel. $OUT gets
# summary.txt and outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/gemv_quant_bulk
for t in gemv_quant engine batch_invariance; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
declare -A SETTING=(
  [direct]="ROSEINFER_CUDA_GEMV_QUANT_BULK=0"
  [bulk2]="ROSEINFER_CUDA_GEMV_QUANT_STAGES=2"
  [bulk4]="ROSEINFER_CUDA_GEMV_QUANT_STAGES=4"
  [bulk8]="ROSEINFER_CUDA_GEMV_QUANT_STAGES=8"
)
for s in ${SETTINGS:-direct bulk2 bulk4 bulk8}; do
  for rows in 1 8; do
    step "bench_gemv_quant_${s}_n$rows" 200 env "${SETTING[$s]}" ROSEINFER_BENCH_TYPES=Q4_K \
      ROSEINFER_BENCH_ROWS=$rows "$B/gpu_bench_gemv_quant" --no-skip
    grep -E "^(llama|qkv|o |gate|down|lm_head)" "$OUT/bench_gemv_quant_${s}_n$rows.txt" |
      sed "s/^/$s n$rows: /" | tee -a "$SUMMARY"
  done
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in llama-1b llama-8b; do
    for s in direct bulk4; do
      offline_bench "${model}_q4k_b1_${s}_r$round" 1 "${SETTING[$s]}" --model $model \
        --max-model-len 4096 --quantize q4_k
    done
  done
done
for s in direct bulk4; do
  offline_bench "llama-1b_q4k_b8_$s" 8 "${SETTING[$s]}" --model llama-1b --max-model-len 4096 \
    --quantize q4_k
done
offline_bench llama-1b_bf16_b1 1 --model llama-1b --max-model-len 4096
offline_bench llama-8b_bf16_b1 1 --model llama-8b --max-model-len 4096
if ((SECONDS < 450)); then
  step memcheck_gemv_quant 120 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/gpu_test_cuda_gemv_quant" -tc="*direct kernel*"
fi
device_pack
cat "$SUMMARY"
