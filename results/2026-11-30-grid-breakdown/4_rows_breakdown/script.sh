#!/usr/bin/env bash
# Session 38 call 4: where llama-1b's decode step goes at 64 and 256 rows, Q4_K against bf16
# (ncu per-kernel time and DRAM bytes of one graph-less step), and the step with attention left
# out (graphed), to show what the kept-matrix paths (tile GEMM at 64, decode + cuBLAS at 256) cost.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call4
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size
for b in 64 256; do
  for w in bf16 q4_k; do
    q=()
    [[ $w != bf16 ]] && q=(--quantize "$w")
    offline_bench "llama1b_b${b}_$w" "$b" --model llama-1b "${q[@]}"
    offline_bench "llama1b_b${b}_${w}_skip_attention" "$b" ROSEINFER_CUDA_SKIP=attention \
      --model llama-1b "${q[@]}"
    name="ncu_llama1b_b${b}_$w"
    step "$name" 200 env ROSEINFER_CUDA_PROFILE_STEP=40 ncu --clock-control none --csv \
      --page details --profile-from-start off --metrics "$METRICS" "$B/roseinfer" bench \
      --device cuda --mode offline --dataset-name "grid:$b:512:128" --max-num-seqs 256 \
      --max-num-batched-tokens 16384 --model llama-1b "${q[@]}" --no-cuda-graph
    grep '^"' "$OUT/$name.txt" >"$OUT/$name.csv"
    python3 scripts/ncu_summary.py "$OUT/$name.csv" 14 | tee -a "$SUMMARY"
  done
done
decode_step_table
device_pack
