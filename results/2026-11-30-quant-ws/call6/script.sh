#!/usr/bin/env bash
# Session 39 call 6: the warp-specialized kernel with cp.async for both the raw weights (4 threads
# a row, a big step ahead) and x, each copy's landing counted on an mbarrier by
# cp.async.mbarrier.arrive.noinc instead of cp.async groups (so x's lead no longer holds back the
# weights'), the producers' barrier only at big steps; the GEMM test, the probes 0 and 7 of call
# 4, and the kernel bench.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call6
step gemm_quant_test 240 "$B/gpu_test_cuda_gemm_quant"
for tile in 12 11; do
  for probe in 0 7; do
    step "ws_t${tile}_p$probe" 60 env WS_PROBE=$probe ROSEINFER_BENCH_FORCE_TILE=$tile \
      ROSEINFER_BENCH_N=128,256 ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 ROSEINFER_BENCH_MODELS=llama-1b \
      ROSEINFER_BENCH_TILES=0 ROSEINFER_BENCH_MS=5 "$B/gpu_bench_gemm_quant" --no-skip
    grep "^qkv\|^o \|^gate\|^down" "$OUT/ws_t${tile}_p$probe.txt" | awk -v t=$tile -v p=$probe \
      '{print "tile", t, "probe", p, $1, $2, "n", $3, "us", $4}' | tee -a "$SUMMARY"
  done
done
device_pack
