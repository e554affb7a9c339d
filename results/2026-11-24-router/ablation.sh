#!/usr/bin/env bash
# The router's steps one by one on the sim cells (deterministic) and the offline CPU cell (5
# rounds, binaries in turn): each binary built from one commit of branch router2.
# Usage: results/2026-11-24-router/ablation.sh OUT LABEL=BIN...   (a LABEL ending in -lf0 adds
# --router-load-factor 0)
set -eu
OUT=$1; shift
mkdir -p "$OUT"
SIM_MODEL=results/2026-11-23-sim-calibration/llama-1b-h100.json
bench() {  # bench LABEL BIN NAME ARGS...
  local label=$1 bin=$2 name=$3; shift 3
  local extra=()
  [[ $label == *-lf0 ]] && extra=(--router-load-factor 0)
  for policy in prefix precise; do
    "$bin" bench "$@" "${extra[@]}" --router "$policy" --json "$OUT/${name}__${label}__$policy.json" \
      >/dev/null 2>&1
  done
}
for n in 16 64; do
  for lb in "$@"; do
    bench "${lb%%=*}" "${lb#*=}" "sim$n-prefix-groups" --dataset-name "prefix-groups:$((n * 4)):16:x4:64" \
      --random-output-len 32 --model tiny --backend sim --sim-model "$SIM_MODEL" --data-parallel "$n" \
      --num-kv-blocks 256 --block-size 16 --seed 1
  done
done
for lb in "$@"; do
  bench "${lb%%=*}" "${lb#*=}" sim3-pg-online-600 --dataset-name prefix-groups:24:16:x2:64:0.8 \
    --random-output-len 32 --mode online --request-rate 600 --model tiny --backend sim \
    --sim-model "$SIM_MODEL" --data-parallel 3 --num-kv-blocks 256 --block-size 16 --seed 1
done
for k in 1 2 3 4 5; do
  for lb in "$@"; do
    bench "${lb%%=*}" "${lb#*=}" "cpu-prefix-groups.r$k" --dataset-name prefix-groups:12:6:x3:32 \
      --random-output-len 8 --model tiny --device cpu --data-parallel 3 --num-kv-blocks 32 \
      --block-size 16 --seed 1
  done
done
