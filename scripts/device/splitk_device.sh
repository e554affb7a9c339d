#!/usr/bin/env bash
# The quantized GEMM's split-K (kernels/cuda/gemm_quant.cu, kernels/common/gemm_quant_split.h) on
# the GPU machine, one device call per phase, run from the repository root with bundle-pack/
# carried (scripts/make_bundle.sh; results/2026-11-24-splitk ran an earlier form of this script
# from a helper's own bundle-sk/):
#   bash scripts/device/splitk_device.sh explore
#     - the GPU tests (GEMM, backend, engine, batch invariance) and compute-sanitizer memcheck on
#       the GEMM test's small cases;
#     - gpu_bench_gemm_quant: every llama-1b / llama-8b product at n = 16..128, Q4_K and Q8_0,
#       timed at forced slice counts 1 (the kernel before split-K) to 16 and at the rule's, then
#       Q4_K's tile shapes at the rule's slices;
#     - offline decode benches: llama-1b Q4_K at batch 16 / 32 / 64 and llama-8b Q4_K at 16 / 64
#       with split-K (the default), without (ROSEINFER_GEMM_QUANT_SPLIT_K=0: the kernel and the
#       row limits before it, same binary) and in bf16; a few uniform row limits.
#   bash scripts/device/splitk_device.sh final
#     - the same tests, the per-product comparison at the rule's slices against unsplit (and the
#       split products' tile choice against the one before, ROSEINFER_GEMM_QUANT_SPLIT_TILES=0),
#       and the decode benches of the results table, with llama-8b's row limits compared at 64.
# Everything lands in /tmp/splitk_work/<phase> (and $OUT/<phase>.tgz when the script ends; the
# device call also packs it after a timeout); summary.txt holds the lines the README quotes.
# Tested here only for its syntax (no GPU on the build machine).
set -uo pipefail
PHASE=${1:?phase: explore or final}
FINAL=${OUT:-/tmp/splitk_out}
OUT=/tmp/splitk_work/$PHASE
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

bench() {  # NAME ARGS...: one offline bench; its decode tok/s and weight types in the summary
  local name=$1
  shift
  if ((SECONDS > ${DEADLINE:-380})); then
    echo "$name: skipped (past ${DEADLINE:-380}s)" | tee -a "$SUMMARY"
    return 0
  fi
  step "$name" 120 "$B/roseinfer" bench --device cuda --mode offline --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --max-model-len 4096 "$@" --json "$OUT/$name.json"
  bench_summary "$name" "$OUT/$name.json"
}

tests() {
  step gpu_test_cuda_gemm_quant 200 "$B/gpu_test_cuda_gemm_quant"
  step gpu_test_cuda_backend 120 "$B/gpu_test_cuda_backend"
  step gpu_test_cuda_engine 120 "$B/gpu_test_cuda_engine"
  step gpu_test_cuda_batch_invariance 150 "$B/gpu_test_cuda_batch_invariance"
  step memcheck_gemm_quant 120 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/gpu_test_cuda_gemm_quant" "-tc=*identity*,*SmolLM2*,*row ranges*,*shape checks*"
}

# One model's decode at the batches given: split-K (default), unsplit, bf16, then extra variants
# as "NAME=ENV" pairs.
decode() {  # MODEL "BATCHES" [SUFFIX=VAR=VALUE ...]
  local model=$1 batches=$2
  shift 2
  for b in $batches; do
    local args=(--model "$model" --dataset-name "grid:$b:512:128")
    bench "${model}_b${b}_q4_k" "${args[@]}" --quantize q4_k
    ROSEINFER_GEMM_QUANT_SPLIT_K=0 bench "${model}_b${b}_q4_k_unsplit" "${args[@]}" --quantize q4_k
    bench "${model}_b${b}_bf16" "${args[@]}"
    for extra in "$@"; do
      local suffix=${extra%%=*} assign=${extra#*=}
      # shellcheck disable=SC2163
      (export "$assign" && bench "${model}_b${b}_q4_k_${suffix}" "${args[@]}" --quantize q4_k)
    done
  done
}

explore_phase() {
  tests
  ROSEINFER_BENCH_N=16,32,64,128 ROSEINFER_BENCH_TILES=0 ROSEINFER_BENCH_SPLITS=1,2,4,8,16 \
    ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 step bench_splits 150 "$B/gpu_bench_gemm_quant" --no-skip
  sed -n "/one layer/,/^$/p" "$OUT/bench_splits.txt" | grep -E "layer|n +(16|32|64|128):" |
    tee -a "$SUMMARY"
  # Row limits (square, down, wide) beside the rule's: every matrix to 32 rows at batch 32, wide
  # ones to 128 at batch 128.
  decode llama-1b 16
  decode llama-1b 32 rows32=ROSEINFER_CUDA_GEMM_QUANT_ROWS=32,32,64
  decode llama-1b 64
  decode llama-8b 16
  decode llama-8b 64
  decode llama-8b 128 wide128=ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,128
}

final_phase() {
  tests
  ROSEINFER_BENCH_N=16,32,64,128 ROSEINFER_BENCH_TILES=0 ROSEINFER_BENCH_SPLITS=1 \
    ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 step bench_gemm_quant 150 "$B/gpu_bench_gemm_quant" --no-skip
  sed -n "/one layer/,/^$/p" "$OUT/bench_gemm_quant.txt" | grep -E "layer|n +(16|32|64|128):" |
    tee -a "$SUMMARY"
  # The larger activation tiles of split products (choose_tile) against the tile choice before.
  ROSEINFER_GEMM_QUANT_SPLIT_TILES=0 ROSEINFER_BENCH_N=32,64 ROSEINFER_BENCH_TILES=0 \
    ROSEINFER_BENCH_TYPES=Q4_K step bench_split_tiles_off 120 "$B/gpu_bench_gemm_quant" --no-skip
  decode llama-1b "16 32 64"
  decode llama-8b 16
  # llama-8b's down projection through the GEMM up to 64 rows (the default) against 16, and the
  # split products' larger tiles against the tile choice before.
  decode llama-8b 64 down16=ROSEINFER_CUDA_GEMM_QUANT_ROWS=16,16,128 \
    tiles_off=ROSEINFER_GEMM_QUANT_SPLIT_TILES=0
  decode llama-8b 128
}

case $PHASE in
  explore) explore_phase ;;
  final) final_phase ;;
  *) echo "unknown phase $PHASE" >&2 ;;
esac
tar czf "$FINAL/$PHASE.tgz" -C "$(dirname "$OUT")" "$PHASE"
echo "total ${SECONDS}s"
