#!/usr/bin/env bash
# The bf16 GEMV compiled per batch size (kernels/cuda/gemv.cu: kernels for 1, 2 and 4 rows;
# ROSEINFER_CUDA_GEMV_ROWS=4 runs every batch on the 4-row kernel, as before) on the GPU machine,
# one call, bundle-pack/ carried:
#   - gpu_test_cuda_{kernels,backend,engine,batch_invariance} (TESTS picks them);
#   - gpu_bench_cuda decode steps (graphs on) at batches 1-4 for gpt2, llama-1b and llama-8b, in
#     alternation ROUNDS times: the previous commit's binary (bundle/gpu_bench_cuda-base, when
#     carried), the 4-row kernel for every batch, and the per-batch kernels;
#   - roseinfer bench offline grid:1:512:128 (the issue's batch-1 figure) for gpt2 and llama-1b,
#     base and new binaries, twice each.
# Everything lands in $OUT/gemv_rows.tgz; the summary is printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/gemv_rows_out}
OUT=/tmp/gemv_rows_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

for t in ${TESTS:-kernels backend engine batch_invariance}; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done

grid() {  # NAME BIN ENV...: gpu_bench_cuda decode steps, graphs on
  local name=$1 bin=$2
  shift 2
  step "$name" 240 env ROSEINFER_BENCH_MODELS="${MODELS:-gpt2,llama-1b,llama-8b}" \
    ROSEINFER_BENCH_BATCHES="${BATCHES:-1,2,3,4}" ROSEINFER_BENCH_GRAPHS=on "$@" "$bin" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}
for round in $(seq "${ROUNDS:-3}"); do
  [[ -x $B/gpu_bench_cuda-base ]] && grid "base_$round" "$B/gpu_bench_cuda-base"
  grid "rows4_$round" "$B/gpu_bench_cuda" ROSEINFER_CUDA_GEMV_ROWS=4
  grid "new_$round" "$B/gpu_bench_cuda"
done

bench() {  # NAME BIN MODEL: the offline batch-1 figure
  local name=$1 bin=$2 model=$3
  step "$name" 120 "$bin" bench --device cuda --model "$model" --dataset-name grid:1:512:128 \
    --mode offline --json "$OUT/$name.json"
  bench_summary "$name" "$OUT/$name.json"
}
for round in 1 2; do
  for model in gpt2 llama-1b; do
    [[ -x $B/roseinfer-base ]] && bench "bench_${model}_base_$round" "$B/roseinfer-base" "$model"
    bench "bench_${model}_new_$round" "$B/roseinfer" "$model"
  done
done

tar czf "$FINAL/gemv_rows.tgz" -C "$OUT" .
echo "=== summary"
cat "$SUMMARY"
