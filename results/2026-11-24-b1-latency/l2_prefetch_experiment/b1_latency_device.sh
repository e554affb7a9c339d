#!/usr/bin/env bash
# Batch-1 latency experiments on the GPU machine (bundle-pack/ carried): gpu_bench_cuda decode
# steps (graphs on) of gpt2, llama-1b and llama-8b with each L2-prefetch setting
# (ROSEINFER_CUDA_L2_PREFETCH masks, kernels/cuda/l2_prefetch.cuh) and the cluster attention's row
# limit at batch 2-8, each twice in alternation. Everything lands in $OUT/b1_latency.tgz; the
# summary is printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/b1_latency_out}
OUT=/tmp/b1_latency_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
TESTS=${TESTS:-""}
for t in $TESTS; do step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"; done

grid() {  # NAME MODELS BATCHES ENV...: gpu_bench_cuda decode steps, graphs on
  local name=$1 models=$2 batches=$3
  shift 3
  step "$name" 240 env ROSEINFER_BENCH_MODELS="$models" ROSEINFER_BENCH_BATCHES="$batches" \
    ROSEINFER_BENCH_GRAPHS=on "$@" "$B/gpu_bench_cuda" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}
MODELS=${MODELS:-gpt2,llama-1b,llama-8b}
MASKS=${MASKS:-"0 1 2 4 8 16 31"}
for round in 1 2; do
  for mask in $MASKS; do
    grid "prefetch_${mask}_$round" "$MODELS" 1 ROSEINFER_CUDA_L2_PREFETCH=$mask
  done
  for mb in ${SIZES_MB:-8 32}; do
    grid "prefetch_31_${mb}mb_$round" "$MODELS" 1 ROSEINFER_CUDA_L2_PREFETCH=31 \
      ROSEINFER_CUDA_L2_PREFETCH_MB=$mb
  done
  for rows in 0 8; do
    grid "cluster_rows_${rows}_$round" gpt2,llama-1b 2,4,8 ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=$rows
  done
done
tar czf "$FINAL/b1_latency.tgz" -C "$OUT" .
cat "$SUMMARY"
