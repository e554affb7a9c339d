#!/usr/bin/env bash
# The norms fused into the decode GEMVs (issue 12), on the GPU machine from the repository root
# with bundle-pack/ carried: GPU tests, then the same binary with ROSEINFER_CUDA_FUSED_NORM=0
# (before) and unset (after), alternated twice: gpu_bench_cuda's grid at batch 1 (llama-1b, gpt2,
# llama-8b), and roseinfer bench on llama-1b grid B=1 and B=4, nano256. Everything lands in
# $OUT/fused.tgz; the summary is printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/fused_out}
OUT=/tmp/fused_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
for t in ${TESTS-kernels backend engine tensor_parallel}; do step "gpu_test_cuda_$t" 240 "$B/gpu_test_cuda_$t"; done
grid_b1() {  # NAME FUSED(0|1)
  local name=$1 fused=$2
  step "$name" 150 env ROSEINFER_BENCH_MODELS=${MODELS:-llama-1b,gpt2,llama-8b} ROSEINFER_BENCH_BATCHES=1 \
    ROSEINFER_BENCH_GRAPHS=on ROSEINFER_CUDA_FUSED_NORM=$fused "$B/gpu_bench_cuda" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}
bench() {  # NAME FUSED ARGS...
  local name=$1 fused=$2
  shift 2
  step "$name" 120 env ROSEINFER_CUDA_FUSED_NORM=$fused "$B/roseinfer" bench --device cuda "$@" \
    --json "$OUT/$name.json"
  python3 - "$OUT/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    r = json.load(open(sys.argv[1]))["runs"][0]
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
print(sys.argv[2], "decode_tok_s=%.0f output_tok_s=%.0f tpot_p50_ms=%.3f" % (
    r.get("decode_throughput", 0), r["output_throughput"], r["p50_tpot_ms"]))
PY
}
for round in 1 2; do
  grid_b1 "grid_b1_before_$round" 0
  grid_b1 "grid_b1_after_$round" 1
done
for round in 1 2; do
  for fused in 0 1; do
    tag=$([[ $fused == 0 ]] && echo before || echo after)
    bench "llama1b_b1_${tag}_$round" $fused --model llama-1b --dataset-name grid:1:512:128
    bench "llama1b_b4_${tag}_$round" $fused --model llama-1b --dataset-name grid:4:512:128
    bench "nano256_${tag}_$round" $fused --model llama-1b --dataset-name nano256 --max-num-seqs 256 \
      --max-num-batched-tokens 16384
  done
done
cat "$SUMMARY"
tar czf "$FINAL/fused.tgz" -C "$OUT" .
