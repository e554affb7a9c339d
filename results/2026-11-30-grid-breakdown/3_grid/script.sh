#!/usr/bin/env bash
# Session 38 call 3: issue 12's grid at 3c3bc21 (roseinfer-base: dc346db, the session's start),
# then Q4_K_M beside Q4_K and bf16 at 8-32 rows.
set -uo pipefail
FINAL=$OUT
DEADLINE=330 bash scripts/device/issue12_device.sh bench >"$FINAL/bench_stdout.txt" 2>&1
source scripts/device_step.sh
OUT=$FINAL/q4km
device_begin "$OUT"
for run in "llama-1b 16" "llama-1b 32" "llama-8b 8" "llama-8b 32"; do
  read -r model b <<<"$run"
  tag="${model//-/}_b$b"
  for w in bf16 q4_k q4_k_m; do
    ((SECONDS > 540)) && break 2
    q=()
    [[ $w != bf16 ]] && q=(--quantize "$w")
    offline_bench "${tag}_$w" "$b" --model "$model" "${q[@]}"
  done
done
decode_step_table
device_pack
