#!/usr/bin/env bash
# The ends of a batch-1 step on the GPU machine (bundle-pack/ carried; bundle/*-base are the
# previous commit's binaries), one device call per phase:
#   bash scripts/device/step_tail_device.sh tail   # as listed below
#   bash scripts/device/step_tail_device.sh quant  # the quantized GEMV: its GPU tests, gpu_bench_gemv_quant
#                                           # base / weights after the wait / before, bf16
#                                           # batch-1 grids base / new (3 rounds), offline
#                                           # quantized benches at batch 1 the same three ways
#   bash scripts/device/step_tail_device.sh final  # every GPU test in the bundle, compute-sanitizer
#                                           # memcheck and racecheck of the sampler and norm cases,
#                                           # offline benches at batch 1, 8 and 256 in bf16 and
#                                           # quantized (quantized beside base at batch 8)
# The tail phase:
#   - GPU tests named in TESTS (the sampler's split rows, the embedding in the first norm, the
#     backends and engine end to end);
#   - gpu_bench_cuda decode steps (graphs on) at batch 1 beside the base binary, with each change
#     switched off in turn: ROSEINFER_CUDA_SAMPLE_COPY=1 (ids copied from a device buffer, not
#     written to mapped host memory) and ROSEINFER_CUDA_FUSED_EMBEDDING=0 (the embedding's own
#     kernel), twice;
#   - batch 16, 64 and 256 beside base (the sampler splits fewer ways there, 1 way at 256);
#   - offline benches of llama-1b and llama-8b --quantize q4_k at batch 1 with the quantized GEMV's
#     weights before the PDL wait and after (ROSEINFER_CUDA_GEMV_QUANT_EARLY=0), beside base.
# Everything lands in $OUT/<phase>.tgz; the summary is printed last. Tested here only for its
# syntax (no GPU on the build machine).
set -uo pipefail
PHASE=${1:?phase: tail, quant or final}
FINAL=${OUT:-/tmp/step_tail_out}
OUT=/tmp/step_tail_work/$PHASE
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

grid() {  # NAME BIN ENV...: gpu_bench_cuda decode steps, graphs on
  local name=$1 bin=$2
  shift 2
  step "$name" 240 env ROSEINFER_BENCH_MODELS=${MODELS:-gpt2,llama-1b,llama-8b} \
    ROSEINFER_BENCH_BATCHES=${BATCHES:-1} ROSEINFER_BENCH_GRAPHS=on "$@" "$bin" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}

bench() {  # NAME BIN ARGS...: one offline bench, its decode tok/s and weight types
  local name=$1 bin=$2
  shift 2
  if ((SECONDS > ${DEADLINE:-540})); then
    echo "$name: skipped (past ${DEADLINE:-540}s)" | tee -a "$SUMMARY"
    return 0
  fi
  step "$name" 150 "$bin" bench --device cuda --mode offline --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --max-model-len 4096 "$@" --json "$OUT/$name.json"
  python3 - "$OUT/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
for r in d.get("runs", []):
    m = r.get("metrics", r)
    print(sys.argv[2], "decode_tok_s=%.0f tpot_p50_ms=%.3f" % (
        m.get("decode_throughput", 0), m.get("p50_tpot_ms", 0)),
        d.get("config", {}).get("weights", "?"))
PY
}

tail_phase() {
  for t in ${TESTS:-kernels backend engine non_finite gemv_quant}; do
    step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
  done
  for round in 1 2; do
    grid "base_$round" "$B/gpu_bench_cuda-base"
    grid "new_$round" "$B/gpu_bench_cuda"
    grid "sample_copy_$round" "$B/gpu_bench_cuda" ROSEINFER_CUDA_SAMPLE_COPY=1
    grid "embedding_kernel_$round" "$B/gpu_bench_cuda" ROSEINFER_CUDA_FUSED_EMBEDDING=0
  done
  MODELS=gpt2,llama-1b BATCHES=16,64,256 grid batches_base "$B/gpu_bench_cuda-base"
  MODELS=gpt2,llama-1b BATCHES=16,64,256 grid batches_new "$B/gpu_bench_cuda"
  for model in llama-8b llama-1b; do
    args=(--model "$model" --quantize q4_k --dataset-name grid:1:512:128)
    bench "${model}_q4k_base" "$B/roseinfer-base" "${args[@]}"
    bench "${model}_q4k_new" "$B/roseinfer" "${args[@]}"
    ROSEINFER_CUDA_GEMV_QUANT_EARLY=0 bench "${model}_q4k_late" "$B/roseinfer" "${args[@]}"
  done
}

quant_phase() {
  for t in ${TESTS:-gemv_quant backend}; do step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"; done
  step bench_gemv_quant_base 240 "$B/gpu_bench_gemv_quant-base" --no-skip
  step bench_gemv_quant_late 240 env ROSEINFER_CUDA_GEMV_QUANT_EARLY=0 \
    "$B/gpu_bench_gemv_quant" --no-skip
  step bench_gemv_quant_new 240 "$B/gpu_bench_gemv_quant" --no-skip
  grep -E "^  n 1" "$OUT"/bench_gemv_quant_*.txt | tee -a "$SUMMARY"
  for round in 1 2 3; do
    MODELS=gpt2,llama-1b grid "base_$round" "$B/gpu_bench_cuda-base"
    MODELS=gpt2,llama-1b grid "new_$round" "$B/gpu_bench_cuda"
  done
  for round in 1 2; do
    types=(q4_k q8_0)
    ((round == 2)) && types=(q4_k)
    for model in llama-8b llama-1b; do
      for q in "${types[@]}"; do
        args=(--model "$model" --quantize "$q" --dataset-name grid:1:512:128)
        bench "${model}_${q}_base_$round" "$B/roseinfer-base" "${args[@]}"
        ROSEINFER_CUDA_GEMV_QUANT_EARLY=0 bench "${model}_${q}_late_$round" "$B/roseinfer" \
          "${args[@]}"
        bench "${model}_${q}_new_$round" "$B/roseinfer" "${args[@]}"
      done
    done
  done
}

final_phase() {
  for t in "$B"/gpu_test_*; do step "$(basename "$t")" 300 "$t"; done
  local cases='-tc=sampling*,add_norm*'
  step memcheck_sampler_norm 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/gpu_test_cuda_kernels" "$cases"
  step racecheck_sampler_norm 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$B/gpu_test_cuda_kernels" "$cases"
  for b in 1 8; do
    for model in llama-8b llama-1b; do
      bench "${model}_b${b}_bf16" "$B/roseinfer" --model "$model" --dataset-name "grid:$b:512:128"
      for q in q4_k q8_0; do
        args=(--model "$model" --quantize "$q" --dataset-name "grid:$b:512:128")
        bench "${model}_b${b}_${q}" "$B/roseinfer" "${args[@]}"
        ((b == 8)) && bench "${model}_b${b}_${q}_base" "$B/roseinfer-base" "${args[@]}"
      done
    done
  done
  for q in bf16 q4_k; do
    extra=()
    [[ $q != bf16 ]] && extra=(--quantize "$q")
    bench "llama-1b_b256_$q" "$B/roseinfer" --model llama-1b "${extra[@]}" \
      --dataset-name grid:256:512:128
  done
}

case $PHASE in
  tail) tail_phase ;;
  quant) quant_phase ;;
  final) final_phase ;;
  *) echo "unknown phase $PHASE" >&2 ;;
esac
tar czf "$FINAL/$PHASE.tgz" -C "$OUT" .
cat "$SUMMARY"
