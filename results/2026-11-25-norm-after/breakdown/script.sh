#!/usr/bin/env bash
# Session 21's first call (H100, bundle-pack/ carried): the GPU tests that fc4e768's refactor touched
# (backend, gemv_quant), memcheck of the quantized GEMV's fused-norm case, then where a batch-1 step
# of llama-1b goes now (ROSEINFER_CUDA_SKIP per kernel class, Q4_K and bf16) and ncu's per-kernel
# durations of one graph-less step of each. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/s21_first}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
step gpu_test_cuda_backend 240 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_gemv_quant 240 "$B/gpu_test_cuda_gemv_quant"
step memcheck_gemv_quant_fused 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$B/gpu_test_cuda_gemv_quant" -tc="*fused*"
for weights in q4_k bf16; do
  q=()
  [[ $weights != bf16 ]] && q=(--quantize "$weights")
  offline_bench "llama-1b_${weights}" 1 --model llama-1b "${q[@]}"
  for skip in norm attention gemv; do
    offline_bench "llama-1b_${weights}_skip_${skip}" 1 ROSEINFER_CUDA_SKIP="$skip" \
      --model llama-1b "${q[@]}"
  done
done
offline_bench gpt2_bf16 1 --model gpt2
offline_bench gpt2_bf16_skip_gemv 1 ROSEINFER_CUDA_SKIP=gemv --model gpt2
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
for weights in q4_k bf16; do
  q=()
  [[ $weights != bf16 ]] && q=(--quantize "$weights")
  step "ncu_llama-1b_${weights}" 300 env ROSEINFER_CUDA_PROFILE_STEP=40 ncu --clock-control none \
    --csv --page details --profile-from-start off --metrics "$METRICS" "$B/roseinfer" bench \
    --device cuda --mode offline --dataset-name grid:1:512:128 --model llama-1b "${q[@]}" \
    --no-cuda-graph
  grep '^"' "$OUT/ncu_llama-1b_${weights}.txt" >"$OUT/ncu_llama-1b_${weights}.csv"
  python3 scripts/ncu_summary.py "$OUT/ncu_llama-1b_${weights}.csv" 25 | tee -a "$SUMMARY"
done
device_pack
cat "$SUMMARY"
