#!/usr/bin/env bash
# Why batch-1 decode attention costs 26 us a layer on llama-8b (12 on llama-1b) when it reads
# ~2.4 MB (results/2026-11-25-b1-breakdown/), on the H100 (bundle-pack/ carried):
#   - the Q4_K batch-1 offline bench with the cluster kernel (default), the split-KV kernel
#     (ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=0) and the cluster kernel without its fused RoPE;
#   - ncu's full set on one cluster-kernel launch of each model, its per-instruction stall samples
#     (source page, SASS) and the kernel's SASS;
#   - ncu's durations of the split-KV path's kernels.
# $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/attention_profile}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
for model in ${MODELS:-llama-8b llama-1b}; do
  offline_bench "${model}_cluster" 1 --model "$model" --quantize q4_k
  offline_bench "${model}_splitkv" 1 ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=0 --model "$model" \
    --quantize q4_k
  offline_bench "${model}_unfused_rope" 1 ROSEINFER_CUDA_FUSED_ROPE=0 --model "$model" \
    --quantize q4_k
  RUN=("$B/roseinfer" bench --device cuda --mode offline --dataset-name grid:1:512:128 --model
    "$model" --quantize q4_k --no-cuda-graph)
  step "ncu_full_$model" 300 ncu --clock-control none --set full --import-source yes \
    -k regex:cluster_decode --launch-skip 200 --launch-count 1 -o "$OUT/full_$model" "${RUN[@]}"
  step "ncu_details_$model" 60 ncu -i "$OUT/full_$model.ncu-rep" --page details
  step "ncu_source_$model" 60 ncu -i "$OUT/full_$model.ncu-rep" --page source --csv \
    --print-source sass
  grep -iE "Duration|Elapsed Cycles|Registers|Achieved Occupancy|Warp Cycles Per Issued|Issued Ipc|Stall|One or More|No Eligible" \
    "$OUT/ncu_details_$model.txt" | head -40 | sed "s/^/$model: /" | tee -a "$SUMMARY"
  step "ncu_splitkv_$model" 300 env ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=0 ncu \
    --clock-control none --csv --page details --metrics gpu__time_duration.sum \
    -k regex:"attention|rope|merge" --launch-skip 200 --launch-count 6 "${RUN[@]}"
  grep '^"' "$OUT/ncu_splitkv_$model.txt" >"$OUT/ncu_splitkv_$model.csv"
  python3 scripts/ncu_summary.py "$OUT/ncu_splitkv_$model.csv" 10 | tee -a "$SUMMARY"
done
fn=$(cuobjdump --list-elf "$B/roseinfer" >/dev/null 2>&1; cuobjdump --dump-resource-usage "$B/roseinfer" 2>/dev/null |
  grep -o "_Z[A-Za-z0-9_]*cluster_decode_attention_kernelI13__nv_bfloat16Li[0-9]*ELi4E[A-Za-z0-9_]*" | sort -u)
for f in $fn; do
  cuobjdump --dump-sass --function "$f" "$B/roseinfer" >"$OUT/sass_${f: -40}.txt" 2>&1
done
cuobjdump --dump-resource-usage "$B/roseinfer" 2>/dev/null | grep -A1 cluster_decode >"$OUT/resource_usage.txt"
device_pack
cat "$SUMMARY"
