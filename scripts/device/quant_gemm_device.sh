#!/usr/bin/env bash
# The tile-decoding GEMM on kept ggml blocks (kernels/cuda/gemm_quant.cuh) on the GPU machine
# (bundle-pack/ carried), one device call:
#   bash scripts/device/quant_gemm_device.sh check
#     - GPU tests named in TESTS (the GEMM itself, the backends and engine with kept blocks,
#       --batch-invariant with kept blocks, the GEMV and the decoders it shares code with),
#       compute-sanitizer memcheck of the GEMM's test on its smaller cases;
#     - gpu_bench_gemm_quant: one product at a time, the GEMM against decode + cuBLAS and against
#       cuBLAS on bf16 weights, llama-1b and llama-8b shapes, n in BENCH_N;
#     - offline benches: bf16, then the quantized model with the GEMM (the default up to 16 rows)
#       and without it (ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0: each matrix decoded, then cuBLAS;
#       the path before), one binary, at the batches in BATCHES (llama-1b) and at 16 for llama-8b;
#       llama-1b Q4_K under --batch-invariant at batch 1 and 64 through both invariant paths.
# Everything lands in $OUT/<phase>.tgz; the summary is printed last. Tested here only for its
# syntax (no GPU on the build machine).
set -uo pipefail
PHASE=${1:?phase: check, ab or shape}
FINAL=${OUT:-/tmp/quant_gemm_out}
OUT=/tmp/quant_gemm_work/$PHASE
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

bench() {  # NAME BIN ARGS...: one offline bench, its decode and prefill tok/s and weight types
  local name=$1 bin=$2
  shift 2
  if ((SECONDS > ${DEADLINE:-540})); then
    echo "$name: skipped (past ${DEADLINE:-540}s)" | tee -a "$SUMMARY"
    return 0
  fi
  step "$name" 150 "$bin" bench --device cuda --mode offline --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --max-model-len 4096 "$@" --json "$OUT/$name.json"
  bench_summary "$name" "$OUT/$name.json"
}

# What capturing the GEMM's graphs twice costs at start-up: a whole small run's wall time, with
# and without (ROSEINFER_CUDA_RECAPTURE_GRAPHS), twice each way.
recapture_wall_times() {
  for rep in 1 2; do
    for recapture in 1 0; do
      local t0=$EPOCHREALTIME
      ROSEINFER_CUDA_RECAPTURE_GRAPHS=$recapture "$B/roseinfer" bench --device cuda --model llama-1b \
        --quantize q4_k --dataset-name grid:1:16:4 --max-num-seqs 256 >/dev/null 2>&1
      awk -v a="$t0" -v b="$EPOCHREALTIME" -v r="$recapture" -v n="$rep" \
        'BEGIN { printf "wall_s recapture=%s rep=%s %.3f\n", r, n, b - a }' | tee -a "$SUMMARY"
    done
  done
}

check_phase() {
  for t in ${TESTS:-gemm_quant backend batch_invariance engine}; do
    step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
  done
  step memcheck_gemm_quant 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/gpu_test_cuda_gemm_quant" "${MEMCHECK_CASES:--tc=*identity*,*SmolLM2*,*row ranges*,*shape checks*}"
  ROSEINFER_BENCH_N=${BENCH_N:-8,16,24,32,64} ROSEINFER_BENCH_TILES=0 \
    step bench_gemm_quant 240 "$B/gpu_bench_gemm_quant" --no-skip
  sed -n "/one layer/,\$p" "$OUT/bench_gemm_quant.txt" | head -60 | tee -a "$SUMMARY"
  for b in ${BATCHES:-16}; do
    local grid=(--dataset-name "grid:$b:512:128")
    bench "llama-1b_b${b}_bf16" "$B/roseinfer" --model llama-1b "${grid[@]}"
    for q in ${QUANTS:-q4_k q8_0 q4_0}; do
      bench "llama-1b_b${b}_${q}" "$B/roseinfer" --model llama-1b --quantize "$q" "${grid[@]}"
      ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0 bench "llama-1b_b${b}_${q}_decoded" "$B/roseinfer" \
        --model llama-1b --quantize "$q" "${grid[@]}"
    done
  done
  # The graphs captured once (the first capture of the GEMM replays slower).
  ROSEINFER_CUDA_RECAPTURE_GRAPHS=0 bench llama-1b_b16_q4_k_captured_once "$B/roseinfer" \
    --model llama-1b --quantize q4_k --dataset-name grid:16:512:128
  recapture_wall_times
  # --batch-invariant with kept blocks: decoded copies + the pinned GEMM (default) against every
  # product in the tile-decoding GEMM (ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1), at batch 1 and 64.
  for b in ${INVARIANT_BATCHES:-1 64}; do
    local grid=(--dataset-name "grid:$b:512:128" --batch-invariant)
    bench "llama-1b_b${b}_q4_k_invariant" "$B/roseinfer" --model llama-1b --quantize q4_k "${grid[@]}"
    ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1 bench "llama-1b_b${b}_q4_k_invariant_gemm" \
      "$B/roseinfer" --model llama-1b --quantize q4_k "${grid[@]}"
    bench "llama-1b_b${b}_bf16_invariant" "$B/roseinfer" --model llama-1b "${grid[@]}"
  done
  local grid=(--dataset-name grid:16:512:128)
  bench llama-8b_b16_bf16 "$B/roseinfer" --model llama-8b "${grid[@]}"
  bench llama-8b_b16_q4_k "$B/roseinfer" --model llama-8b --quantize q4_k "${grid[@]}"
  ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0 bench llama-8b_b16_q4_k_decoded "$B/roseinfer" \
    --model llama-8b --quantize q4_k "${grid[@]}"
}

# The padded allocation (this binary) against the exact tail copy in the kernel (roseinfer-tailcopy,
# ef47886, carried beside it), each twice in turn, and 17-32 rows through the GEMM
# (ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=32) against the default at batch 32.
ab_phase() {
  step gpu_test_cuda_gemm_quant 300 "$B/gpu_test_cuda_gemm_quant"
  step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
  step memcheck_gemm_quant 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/gpu_test_cuda_gemm_quant" "-tc=*identity*,*SmolLM2*,*row ranges*,*shape checks*,*every tile*"
  local grid=(--model llama-1b --quantize q4_k --dataset-name grid:16:512:128)
  for rep in 1 2; do
    bench "llama-1b_b16_q4_k_padded_$rep" "$B/roseinfer" "${grid[@]}"
    bench "llama-1b_b16_q4_k_tailcopy_$rep" "$B/roseinfer-tailcopy" "${grid[@]}"
    ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0 bench "llama-1b_b16_q4_k_decoded_$rep" "$B/roseinfer" \
      "${grid[@]}"
  done
  for model in llama-1b llama-8b; do
    grid=(--model "$model" --quantize q4_k --dataset-name grid:32:512:128)
    bench "${model}_b32_q4_k" "$B/roseinfer" "${grid[@]}"
    ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=32 bench "${model}_b32_q4_k_gemm" "$B/roseinfer" "${grid[@]}"
  done
}

# The per-shape row limit (quant_gemm_row_limit, the default) against one limit of 16 for every
# matrix (the rule before) and against decode + cuBLAS, at batches 16, 32 and 64.
shape_phase() {
  step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
  step gpu_test_cuda_engine 300 "$B/gpu_test_cuda_engine"
  for model in llama-1b llama-8b; do
    for b in ${SHAPE_BATCHES:-16 32 64}; do
      local grid=(--model "$model" --dataset-name "grid:$b:512:128")
      [[ $model == llama-1b || $b != 16 ]] && bench "${model}_b${b}_bf16" "$B/roseinfer" "${grid[@]}"
      local quants="q4_k q8_0"
      [[ $model == llama-8b ]] && quants=q4_k
      for q in $quants; do
        bench "${model}_b${b}_${q}" "$B/roseinfer" "${grid[@]}" --quantize "$q"
        ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=16 bench "${model}_b${b}_${q}_max16" "$B/roseinfer" \
          "${grid[@]}" --quantize "$q"
        ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=0 bench "${model}_b${b}_${q}_decoded" "$B/roseinfer" \
          "${grid[@]}" --quantize "$q"
      done
    done
  done
  recapture_wall_times
}

case $PHASE in
  check) check_phase ;;
  shape) shape_phase ;;
  ab) ab_phase ;;
  *) echo "unknown phase $PHASE" >&2 ;;
esac
tar czf "$FINAL/$PHASE.tgz" -C "$OUT" .
cat "$SUMMARY"
