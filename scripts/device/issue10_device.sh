#!/usr/bin/env bash
# Issue 10 on the GPU machine (batch invariance, tensor-core prefill attention), in phases that fit
# one device call each. Carry ["bundle-pack"] (the bundle holds bundle/roseinfer-base, the
# previous commit's binary, for side-by-side figures) and run from the repository root:
#   bash scripts/device/issue10_device.sh tests    # every GPU test in the bundle
#   bash scripts/device/issue10_device.sh bench    # base vs new vs new --batch-invariant, same call
#   bash scripts/device/issue10_device.sh study    # scripts/invariance_study.sh on llama-1b
#   bash scripts/device/issue10_device.sh memcheck # compute-sanitizer on the new kernels' tests
#   bash scripts/device/issue10_device.sh final    # tests, then this commit with and without --batch-invariant
# Outputs land in $OUT/<phase>.tgz with a summary printed last.
set -uo pipefail
PHASE=${1:?phase: tests, bench, study or memcheck}
FINAL=${OUT:-/tmp/issue10_out}
OUT=/tmp/issue10_work/$PHASE
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

bench_line() {  # NAME JSON: the figures a row of the results table needs
  python3 - "$1" "$2" <<'EOF' | tee -a "$OUT/figures.txt"
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name}: no result ({e})"); sys.exit()
runs = d.get("runs") or [d]
for r in runs:
    m = r.get("metrics", r)
    keys = ["prefill_throughput", "decode_throughput", "output_throughput", "duration"]
    vals = {k: m.get(k) for k in keys if m.get(k) is not None}
    print(name, r.get("mode", ""), r.get("prefix_cache", ""),
          " ".join(f"{k}={v:.6g}" for k, v in vals.items()))
EOF
}

case $PHASE in
  tests)
    for t in "$B"/gpu_test_*; do step "$(basename "$t")" 300 "$t"; done
    ;;
  bench)
    # Each workload: the previous commit, this one, this one with --batch-invariant.
    declare -A WORK=(
      [grid_llama1b_b256]="--model llama-1b --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384"
      [grid_gpt2_b256]="--model gpt2 --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384"
      [grid_llama1b_b1]="--model llama-1b --dataset-name grid:1:512:128"
      [nano256_llama1b]="--model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384"
      [seed000_gpt2]="--model gpt2 --dataset-name seed000"
    )
    for name in grid_llama1b_b256 grid_gpt2_b256 nano256_llama1b seed000_gpt2 grid_llama1b_b1; do
      for variant in base new invariant; do
        bin=$B/roseinfer
        extra=()
        [[ $variant == base ]] && bin=$B/roseinfer-base
        [[ $variant == invariant ]] && extra=(--batch-invariant --max-model-len 4096)
        # shellcheck disable=SC2086
        step "${name}_$variant" 120 "$bin" bench ${WORK[$name]} --device cuda --mode offline \
          "${extra[@]}" --json "$OUT/${name}_$variant.json"
        bench_line "${name}_$variant" "$OUT/${name}_$variant.json"
      done
    done
    # The invariant grid at the model's own context length (131072 for llama-1b: 256 splits).
    step grid_llama1b_b256_invariant_fullctx 120 "$B/roseinfer" bench ${WORK[grid_llama1b_b256]} \
      --device cuda --mode offline --batch-invariant --json "$OUT/grid_llama1b_b256_invariant_fullctx.json"
    bench_line grid_llama1b_b256_invariant_fullctx "$OUT/grid_llama1b_b256_invariant_fullctx.json"
    ROSEINFER_CUDA_STATS=1 step invariant_gemm_choice 120 "$B/roseinfer" bench --model llama-1b \
      --device cuda --dataset-name grid:1:16:4 --batch-invariant --max-model-len 4096
    step bench_prefill_attention 120 "$B/gpu_bench_prefill_attention"
    step bench_gemm_invariant 120 "$B/gpu_bench_gemm_invariant"
    ;;
  final)
    # After the fixes: every GPU test, then this commit with and without --batch-invariant.
    for t in "$B"/gpu_test_*; do step "$(basename "$t")" 200 "$t"; done
    ROSEINFER_CUDA_STATS=1 step invariant_gemm_choice 120 "$B/roseinfer" bench --model llama-1b \
      --device cuda --dataset-name grid:1:16:4 --batch-invariant --max-model-len 4096
    grep "invariant gemm" "$OUT/invariant_gemm_choice.txt" | head -2
    declare -A WORK=(
      [grid_llama1b_b256]="--model llama-1b --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384 --max-model-len 4096"
      [nano256_llama1b]="--model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 --max-model-len 4096"
      [grid_llama1b_b1]="--model llama-1b --dataset-name grid:1:512:128 --max-model-len 4096"
      [grid_gpt2_b256]="--model gpt2 --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384"
      [seed000_gpt2]="--model gpt2 --dataset-name seed000"
    )
    for name in grid_llama1b_b256 nano256_llama1b grid_llama1b_b1 grid_gpt2_b256 seed000_gpt2; do
      for variant in new invariant; do
        extra=()
        [[ $variant == invariant ]] && extra=(--batch-invariant)
        # shellcheck disable=SC2086
        step "${name}_$variant" 60 "$B/roseinfer" bench ${WORK[$name]} --device cuda \
          --mode offline "${extra[@]}" --json "$OUT/${name}_$variant.json"
        bench_line "${name}_$variant" "$OUT/${name}_$variant.json"
      done
    done
    step bench_gemm_invariant 60 "$B/gpu_bench_gemm_invariant"
    step bench_gemv_quant 60 "$B/gpu_bench_gemv_quant" --no-skip
    ;;
  study)
    step invariance_study 560 env OUT="$OUT/study" BIN="$B/roseinfer" MODEL=llama-1b \
      REQUESTS="${REQUESTS:-120}" bash scripts/invariance_study.sh
    cat "$OUT/study/invariance.md" 2>/dev/null
    ;;
  memcheck)
    for t in gpu_test_cuda_prefill_attention gpu_test_cuda_gemm_invariant; do
      step "memcheck_$t" 280 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/$t"
    done
    ;;
esac
tar czf "$FINAL/$PHASE.tgz" -C "$OUT" .
echo "== summary ($PHASE)"
cat "$SUMMARY"
