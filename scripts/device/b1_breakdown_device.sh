#!/usr/bin/env bash
# Where a batch-1 decode step goes with Q4_K weights (issue 12: 2.5x bf16 needs the step's
# non-GEMV part down), on the H100 (bundle-pack/ carried): for llama-8b and llama-1b in Q4_K and
# bf16, the offline grid:1:512:128 bench with each kernel class left out of the graphed step
# (ROSEINFER_CUDA_SKIP: outputs wrong, step time real), then ncu's per-kernel duration and DRAM bytes
# of one graph-less Q4_K step of each model. MODELS (default "llama-8b llama-1b"), WEIGHTS (default
# "q4_k bf16"), NCU_WEIGHTS (the one ncu profiles, default q4_k) and SKIPS (default "norm attention
# gemv norm,attention") choose the runs; a model may be /tmp/models/smollm2-shape (made here by
# scripts/make_smollm2_shape.py), runs named by its last path part. $OUT gets summary.txt (one line
# per run, then the ncu per-kernel tables) and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/b1_breakdown}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
MODELS=${MODELS:-"llama-8b llama-1b"}
SKIPS=${SKIPS:-"norm attention gemv norm,attention"}
if [[ " $MODELS " == *" /tmp/models/smollm2-shape "* ]]; then
  step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
fi
for model in $MODELS; do
  name=$(basename "$model")
  for weights in ${WEIGHTS:-q4_k bf16}; do
    q=()
    [[ $weights != bf16 ]] && q=(--quantize "$weights")
    offline_bench "${name}_${weights}" 1 --model "$model" "${q[@]}"
    for skip in $SKIPS; do
      offline_bench "${name}_${weights}_skip_${skip//,/_}" 1 ROSEINFER_CUDA_SKIP="$skip" \
        --model "$model" "${q[@]}"
    done
  done
done
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
NCU_WEIGHTS=${NCU_WEIGHTS:-q4_k}
q=()
[[ $NCU_WEIGHTS != bf16 ]] && q=(--quantize "$NCU_WEIGHTS")
for model in $MODELS; do
  name="ncu_$(basename "$model")_$NCU_WEIGHTS"
  step "$name" 300 env ROSEINFER_CUDA_PROFILE_STEP=40 ncu --clock-control none --csv \
    --page details --profile-from-start off --metrics "$METRICS" "$B/roseinfer" bench --device cuda \
    --mode offline --dataset-name grid:1:512:128 --model "$model" "${q[@]}" --no-cuda-graph
  grep '^"' "$OUT/$name.txt" >"$OUT/$name.csv"
  python3 scripts/ncu_summary.py "$OUT/$name.csv" 25 | tee -a "$SUMMARY"
done
device_pack
cat "$SUMMARY"
