#!/usr/bin/env bash
# The direct GEMV for Q4_1, Q4_0 and Q8_0, end to end (issue 12), on the H100 with bundle-pack/
# carried, after scripts/model_parts.sh staged the real SmolLM2 GGUF (Q4_1 with one Q8_0 matrix)
# in /tmp/rose-model: the GEMV test, its direct-against-staged case under memcheck, the backend
# and real-model tests; gpu_bench_gemv_quant staged (ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0) and
# direct; then decode, direct and staged in alternation with one binary: SmolLM2 Q4_1 and
# llama-1b --quantize q4_0 / q8_0 at batch 1 (two rounds) and batch 8 (one), llama-1b Q4_K at
# batch 1 (unchanged kernel). $OUT: summary.txt, outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/direct_types}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
MODEL=$(scripts/model_parts.sh join) || MODEL=""
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step memcheck_direct 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$B/gpu_test_cuda_gemv_quant" -tc="*direct kernel*"
step gpu_test_cuda_backend 240 "$B/gpu_test_cuda_backend"
if [[ -n $MODEL ]]; then
  ROSEINFER_MODEL_CACHE=/tmp/rose-model step gpu_test_cuda_real_quantized 240 \
    "$B/gpu_test_cuda_real_quantized" -s
  grep -E "greedy|worst" "$OUT/gpu_test_cuda_real_quantized.txt" | sed 's/.*MESSAGE: //' |
    tee -a "$SUMMARY"
fi
for s in staged direct; do
  step "bench_gemv_quant_$s" 200 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT=$([[ $s == staged ]] && echo 0 || echo 1) \
    ROSEINFER_BENCH_TYPES=Q4_1,Q4_0,Q8_0,Q4_K "$B/gpu_bench_gemv_quant" --no-skip
  grep -iE "layer|lm_head" "$OUT/bench_gemv_quant_$s.txt" | sed "s/^/$s: /" | tee -a "$SUMMARY"
done
ab() {  # NAME BATCH ARGS...: direct (default), then staged
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_direct" "$batch" "$@"
  offline_bench "${name}_staged" "$batch" ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0 "$@"
}
for round in 1 2; do
  [[ -n $MODEL ]] && ab "r${round}_smollm2_q4_1_b1" 1 --model "$MODEL"
  ab "r${round}_llama-1b_q4_0_b1" 1 --model llama-1b --quantize q4_0
  ab "r${round}_llama-1b_q8_0_b1" 1 --model llama-1b --quantize q8_0
done
[[ -n $MODEL ]] && ab smollm2_q4_1_b8 8 --model "$MODEL"
ab llama-1b_q4_0_b8 8 --model llama-1b --quantize q4_0
ab llama-1b_q8_0_b8 8 --model llama-1b --quantize q8_0
offline_bench llama-1b_q4_k_b1 1 --model llama-1b --quantize q4_k
device_pack
cat "$SUMMARY"
