#!/usr/bin/env bash
# Two questions after the tensor-core cluster attention, on the H100 with bundle-pack/ carried
# (roseinfer, roseinfer-base = the commit before the row limit changed):
#   1. the cluster attention's row limit: 8 (the default), 16 (ROSEINFER_CUDA_CLUSTER_ATTENTION_
#      MAX_ROWS=16) and the previous 4 (roseinfer-base) at batches 8 and 16, two rounds;
#   2. where the one-block add-norm's 7 us go: ncu's full set and stall samples of one launch.
# $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/rows_norm}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
for round in 1 2; do
  for batch in 8 16; do
    for model in "llama-1b" "llama-8b --quantize q4_k" "llama-1b --quantize q4_k"; do
      name="r${round}_$(echo "$model" | tr -d ' -' | sed 's/quantize//')_b$batch"
      offline_bench "${name}_rows8" "$batch" --model $model
      offline_bench "${name}_rows16" "$batch" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 --model $model
      base_offline_bench "${name}_rows4_base" "$batch" --model $model
    done
  done
done
step ncu_norm 300 ncu --clock-control none --set full --import-source yes -k regex:add_norm \
  --launch-skip 300 --launch-count 1 -o "$OUT/norm" "$B/roseinfer" bench --device cuda \
  --mode offline --dataset-name grid:1:512:128 --model llama-8b --quantize q4_k --no-cuda-graph
step ncu_norm_details 60 ncu -i "$OUT/norm.ncu-rep" --page details
step ncu_norm_source 60 ncu -i "$OUT/norm.ncu-rep" --page source --csv --print-source sass
rm -f "$OUT/norm.ncu-rep"
device_pack
cat "$SUMMARY"
