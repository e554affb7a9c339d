#!/usr/bin/env bash
# The direct Q4_K GEMV at 1-4 rows (issue 12) against the staged kernel, on the GPU machine
# (bundle-pack/ carried: roseinfer, gpu_bench_gemv_quant and the GPU tests named below). One
# binary: ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0 is the staged kernel, and
# ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256 / 1024 the direct kernel's other block sizes.
# Steps: the GPU tests that run Q4_K at 1-4 rows; the kernel bench at llama-1b / llama-8b shapes
# per setting; offline batch-1 decode of llama-1b and llama-8b `--quantize q4_k` per
# DECODE_SETTINGS (twice), batch 2 once, bf16 beside them and transformers on the llama-1b shape
# (.peers/ carried); with NCU=1, ncu on the direct kernel's batch-1 launches. $OUT gets
# summary.txt and outputs.tgz (every step's output and command).
set -uo pipefail
OUT=${OUT:-/tmp/gemv_quant_direct}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
for t in gemv_quant kernels backend engine batch_invariance non_finite; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
# name -> environment of each setting
declare -A SETTING=(
  [staged]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0"
  [direct]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT=1"
  [threads256]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256"
  [threads1024]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=1024"
)
SETTINGS=${SETTINGS:-direct staged threads256 threads1024}
for s in $SETTINGS; do
  step "bench_gemv_quant_$s" 200 env ${SETTING[$s]} ROSEINFER_BENCH_TYPES=Q4_K \
    ROSEINFER_BENCH_ROWS=1 "$B/gpu_bench_gemv_quant" --no-skip
  grep -E "^(llama|qkv|o |gate|down|lm_head|  n 1)" "$OUT/bench_gemv_quant_$s.txt" |
    sed "s/^/$s: /" | tee -a "$SUMMARY"
done
decode() {  # NAME MODEL BATCH ENV [--quantize q4_k]
  local name=$1 model=$2 batch=$3 env=$4
  shift 4
  step "$name" 150 env $env "$B/roseinfer" bench --device cuda --mode offline --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --max-model-len 4096 --model "$model" "$@" \
    --dataset-name "grid:$batch:512:128" --json "$OUT/$name.json"
  bench_summary "$name" "$OUT/$name.json"
}
for round in 1 2; do
  for model in llama-1b llama-8b; do
    for s in ${DECODE_SETTINGS:-direct staged threads1024}; do
      decode "${model}_q4k_b1_${s}_$round" $model 1 "${SETTING[$s]}" --quantize q4_k
    done
  done
done
for model in llama-1b llama-8b; do
  for s in direct staged; do decode "${model}_q4k_b2_$s" $model 2 "${SETTING[$s]}" --quantize q4_k; done
  decode "${model}_bf16_b1" $model 1 "ROSEINFER_CUDA_GEMV_QUANT_DIRECT=1"
done
peer_b1 llama1b
[[ ${NCU:-0} == 1 ]] && step ncu_direct 300 env ROSEINFER_BENCH_ITERS=10 ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=1 \
  ncu --clock-control none --csv --page details -k regex:gemv_q4k_direct --launch-count 300 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats "$B/gpu_bench_gemv_quant" --no-skip
[[ -f $OUT/ncu_direct.txt ]] && grep '^"' "$OUT/ncu_direct.txt" >"$OUT/ncu_direct.csv" && rm -f "$OUT/ncu_direct.txt"
device_pack
cat "$SUMMARY"
