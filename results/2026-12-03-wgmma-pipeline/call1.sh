#!/usr/bin/env bash
# Session 54 call 1: the quantized GEMM's wgmma tiles software-pipelined (each warpgroup decodes
# sub-step j + 1 while its wgmmas of sub-step j run). The GEMM test on the new kernel (every tile
# shape against the CPU reference and bit-identical to the mma.sync shapes), then the timing
# driver of the new kernel (the kernel before: call 2)
# on llama-1b and llama-8b shapes, Q4_K and Q8_0, 128-512 rows.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call1
step gemm_quant_test 240 "$B/gpu_test_cuda_gemm_quant"
for bin in gpu_bench_gemm_quant; do
  step "bench${bin#gpu_bench_gemm_quant}" 200 env ROSEINFER_BENCH_N=128,256,512 \
    ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 ROSEINFER_BENCH_MODELS=llama-1b,llama-8b ROSEINFER_BENCH_MS=8 \
    "$B/$bin" --no-skip
done
device_pack
