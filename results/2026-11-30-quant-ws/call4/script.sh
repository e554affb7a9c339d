#!/usr/bin/env bash
# Session 39 call 4: what bounds the warp-specialized kernel. A diagnostic build (not committed;
# WS_PROBE bits: 1 producers skip the decoded values' stores, 2 consumers skip the wgmmas, 4 producers skip the x
# copies) times llama-1b Q4_K at 256 and 128 rows on "ws 128 n256" (tile 12) and "ws 128 n128" (11).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call4
for tile in 12 11; do
  for probe in 0 1 2 4 5 3 6 7; do
    step "ws_t${tile}_p$probe" 60 env WS_PROBE=$probe ROSEINFER_BENCH_FORCE_TILE=$tile \
      ROSEINFER_BENCH_N=128,256 ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_MODELS=llama-1b \
      ROSEINFER_BENCH_TILES=0 ROSEINFER_BENCH_MS=5 "$B/gpu_bench_gemm_quant" --no-skip
    grep "^qkv\|^o \|^gate\|^down" "$OUT/ws_t${tile}_p$probe.txt" | awk -v t=$tile -v p=$probe \
      '{print "tile", t, "probe", p, $1, $2, "n", $3, "us", $4}' | tee -a "$SUMMARY"
  done
done
device_pack
