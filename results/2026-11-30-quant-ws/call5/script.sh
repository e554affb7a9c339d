#!/usr/bin/env bash
# Session 39 call 5: call 4's diagnostic build with three A buffers (the producer waits for the
# consumers' release of j - 3, not j - 2: a sub-step of slack instead of a round trip each
# sub-step). Probes 0 (the kernel) and 7 (no decode, no wgmma, no x copies: the skeleton).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call5
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
