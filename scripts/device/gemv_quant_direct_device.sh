#!/usr/bin/env bash
# The direct Q4_K GEMV at 1-4 rows (issue 12) against the staged kernel, on the GPU machine
# (bundle-pack/ carried: roseinfer, gpu_bench_gemv_quant and the GPU tests named below). One
# binary: ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0 is the staged kernel, and
# ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256 the direct kernel's other block size (1024 was a
# setting until it was removed after 4772d16).
# Steps: the GPU tests that run Q4_K at 1-4 rows; the kernel bench at llama-1b / llama-8b shapes
# per setting; offline batch-1 decode of llama-1b and llama-8b `--quantize q4_k` per
# DECODE_SETTINGS (twice), batch 2 once, bf16 beside them and transformers on the llama-1b shape
# (.peers/ carried); with NCU=1, ncu on the direct kernel's batch-1 launches. $OUT gets
# summary.txt and outputs.tgz (every step's output and command).
set -uo pipefail
OUT=${OUT:-/tmp/gemv_quant_direct}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
for t in gemv_quant kernels backend engine batch_invariance non_finite; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
# name -> environment of each setting
declare -A SETTING=(
  [staged]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0"
  [direct]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT=1"
  [threads256]="ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256"
)
SETTINGS=${SETTINGS:-direct staged threads256}
for s in $SETTINGS; do
  step "bench_gemv_quant_$s" 200 env ${SETTING[$s]} ROSEINFER_BENCH_TYPES=Q4_K \
    ROSEINFER_BENCH_ROWS=1 "$B/gpu_bench_gemv_quant" --no-skip
  grep -E "^(llama|qkv|o |gate|down|lm_head|  n 1)" "$OUT/bench_gemv_quant_$s.txt" |
    sed "s/^/$s: /" | tee -a "$SUMMARY"
done
for round in 1 2; do
  for model in llama-1b llama-8b; do
    for s in ${DECODE_SETTINGS:-direct staged threads256}; do
      offline_bench "${model}_q4k_b1_${s}_$round" 1 ${SETTING[$s]} --model $model \
        --max-model-len 4096 --quantize q4_k
    done
  done
done
for model in llama-1b llama-8b; do
  for s in direct staged; do
    offline_bench "${model}_q4k_b2_$s" 2 ${SETTING[$s]} --model $model --max-model-len 4096 \
      --quantize q4_k
  done
  offline_bench "${model}_bf16_b1" 1 --model $model --max-model-len 4096
done
peer_b1 llama1b
[[ ${NCU:-0} == 1 ]] && step ncu_direct 300 env ROSEINFER_BENCH_ITERS=10 ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=1 \
  ncu --clock-control none --csv --page details -k regex:gemv_direct_kernel --launch-count 300 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats "$B/gpu_bench_gemv_quant" --no-skip
[[ -f $OUT/ncu_direct.txt ]] && grep '^"' "$OUT/ncu_direct.txt" >"$OUT/ncu_direct.csv" && rm -f "$OUT/ncu_direct.txt"
device_pack
cat "$SUMMARY"
