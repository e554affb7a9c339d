#!/usr/bin/env bash
# The direct GEMV for Q4_1, Q4_0 and Q8_0 (beside Q4_K) on the GPU machine (bundle-pack/ carried,
# made by `BUILD=build TARGETS="gpu_test_cuda_gemv_quant gpu_bench_gemv_quant"
# ONLY="gpu_test_cuda_gemv_quant gpu_bench_gemv_quant" scripts/make_bundle.sh`). Steps: the GEMV
# test; its direct-against-staged case under compute-sanitizer memcheck (the 2-byte aligned loads
# must stay inside each block); the kernel bench per type at 1, 4 and 8 rows, staged
# (ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0) and direct. $OUT gets summary.txt and every step's output.
set -uo pipefail
OUT=${OUT:-/tmp/gemv_quant_direct_types}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step memcheck_direct 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$B/gpu_test_cuda_gemv_quant" -tc="*direct kernel*"
for s in staged direct; do
  direct=1
  [[ $s == staged ]] && direct=0
  step "bench_gemv_quant_$s" 200 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT=$direct \
    ROSEINFER_BENCH_TYPES=${TYPES:-Q4_1,Q4_0,Q8_0,Q4_K} "$B/gpu_bench_gemv_quant" --no-skip
done
cat "$SUMMARY"
