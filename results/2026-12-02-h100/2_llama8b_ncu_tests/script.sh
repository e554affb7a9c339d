#!/usr/bin/env bash
# Session 49, call 2 (nvidia-h100-x1, right after call 1; carry bundle-pack): issue 12's llama-8b
# rows at 16, 64 and 256 in bf16, Q8_0, Q4_0 and Q4_K (quantized at load); ncu's per-kernel time
# and DRAM bytes of one graph-less batch-1 step of llama-1b in Q4_K and in bf16 (the "after" of
# results/2026-11-24-small-steps/ncu_b1_before, also an H100); then the GPU tests the bundle holds,
# while time is left (DEADLINE seconds into the call).
set -uo pipefail
[[ -x bundle/roseinfer ]] || { mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz; }
source scripts/device_step.sh
device_begin /tmp/grid8b
BIN=$B/roseinfer
for b in 256 64 16; do
  for q in bf16 q4_k q8_0 q4_0; do
    extra=()
    [[ $q != bf16 ]] && extra=(--quantize "$q")
    bench_with "$BIN" "llama8b_b${b}_$q" "$b" --model llama-8b "${extra[@]}"
  done
done
decode_step_table
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
for weights in q4_k bf16; do
  q=()
  [[ $weights != bf16 ]] && q=(--quantize "$weights")
  name="ncu_llama-1b_$weights"
  step "$name" 150 env ROSEINFER_CUDA_PROFILE_STEP=40 ncu --clock-control none --csv \
    --page details --profile-from-start off --metrics "$METRICS" "$BIN" bench --device cuda \
    --mode offline --dataset-name grid:1:512:128 --model llama-1b "${q[@]}" --no-cuda-graph
  grep '^"' "$OUT/$name.txt" >"$OUT/$name.csv"
  python3 scripts/ncu_summary.py "$OUT/$name.csv" 25 | tee -a "$SUMMARY"
done
for t in "$B"/gpu_test_*; do
  [[ -x $t ]] || continue
  if ((SECONDS > ${DEADLINE:-470})); then
    echo "$(basename "$t"): skipped (past ${DEADLINE:-470}s)" | tee -a "$SUMMARY"
    continue
  fi
  step "$(basename "$t")" 120 "$t"
done
device_pack
