#!/usr/bin/env bash
# The direct quantized GEMV for Q6_K (kernels/cuda/gemv_quant.cu, Direct<BlockQ6_K>), on the GPU
# machine with bundle-pack/ carried: the GEMV test (direct against staged, bit for bit, every type
# and epilogue), memcheck of its direct-kernel case, the backend test; then gpu_bench_gemv_quant on
# Q6_K (and Q4_K beside it) at 1, 4 and 8 rows, staged (ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0) and
# direct, two rounds, one binary. First run on dfb758c plus the kernel taking Q6_K at every row
# count; the kept code takes it at one row only. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/gemv_q6k_direct}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
step memcheck_direct 400 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$B/gpu_test_cuda_gemv_quant" -tc="*direct kernel*"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
for r in 1 2; do
  for d in 0 1; do
    step "bench_direct${d}_r$r" 200 env ROSEINFER_CUDA_GEMV_QUANT_DIRECT=$d \
      ROSEINFER_BENCH_TYPES=Q6_K,Q4_K "$B/gpu_bench_gemv_quant" --no-skip
  done
done
grep -h "layer's four\|n [148]:" "$OUT"/bench_direct*_r1.txt | tee -a "$SUMMARY"
device_pack
