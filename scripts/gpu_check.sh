#!/usr/bin/env bash
# Run ON the GPU machine from the repo root, with bundle/ carried (scripts/make_bundle.sh builds
# it): the GPU's identity, every GPU and CPU test from bundle/, compute-sanitizer memcheck on a GPU
# test and a short `roseinfer run`, then the grid benchmark. Logs go under $OUT; a summary table is
# printed last.
#   GPU_CHECK_BENCH=0   skip the benchmark;  ROSEINFER_BENCH_MODELS=gpt2,llama-1b  what it runs
set -uo pipefail
# The carried bundle may come packed (scripts/make_bundle.sh writes bundle-pack/bundle.tar.xz).
if [[ ! -x bundle/roseinfer && -f bundle-pack/bundle.tar.xz ]]; then tar xJf bundle-pack/bundle.tar.xz; fi
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
B=$PWD/bundle
export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
SUMMARY=()
record() { SUMMARY+=("$(printf '%-44s %s' "$1" "$2")"); }

run_logged() {  # name, timeout, command...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local status=PASS
  [[ $rc == 77 ]] && status=SKIP
  [[ $rc != 0 && $rc != 77 ]] && status="FAIL(rc=$rc)"
  record "$name" "$status $((SECONDS - start))s"
  [[ $status == FAIL* ]] && tail -n 30 "$OUT/$name.log"
  return 0
}

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader |
  tee "$OUT/nvidia_smi.txt"
missing=$(ldd "$B/roseinfer" | grep "not found" || true)
[[ -n "$missing" ]] && echo "missing libraries: $missing"

echo "== GPU tests"
# A bundle built with ONLY=... may hold no test of a kind: skip the unmatched pattern.
for t in "$B"/gpu_test_*; do
  [[ -x $t ]] || continue
  run_logged "$(basename "$t")" 300 "$t"
done
echo "== CPU tests"
for t in "$B"/test_*; do
  [[ -x $t ]] || continue
  run_logged "$(basename "$t")" 120 "$t"
done

echo "== compute-sanitizer"
if command -v compute-sanitizer >/dev/null; then
  run_logged memcheck_kernels 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu_test_cuda_kernels" -tc="paged attention: prefill*,RoPE*"
  run_logged memcheck_backend 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu_test_cuda_backend" -tc="greedy outputs*,norms fused*"
  run_logged memcheck_dequant 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu_test_cuda_dequant" -tc="device dequantization*,StoredUploader*"
  run_logged memcheck_gemv_quant 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu_test_cuda_gemv_quant" -tc="quantized GEMV: ragged*,quantized GEMV: SmolLM2*"
  if "$B/roseinfer" run --help >/dev/null 2>&1 && [[ -f datasets/sample.jsonl ]]; then
    head -n 2 datasets/sample.jsonl >"$OUT/two_prompts.jsonl"
    run_logged memcheck_roseinfer_run 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$B/roseinfer" run "$OUT/two_prompts.jsonl" --device cuda --model tiny --num-kv-blocks 256 \
      --max-tokens 8 -o "$OUT/run_out.jsonl"
  else
    record memcheck_roseinfer_run "SKIP (no run command yet)"
  fi
else
  record compute-sanitizer "SKIP (not installed)"
fi

if [[ ${GPU_CHECK_BENCH:-1} != 0 ]]; then
  echo "== bench"
  timeout 200 "$B/gpu_bench_cuda" -tc="bench*" --no-skip 2>&1 | tee "$OUT/bench.log"
  record bench "$(grep -cE '^(gpt2|llama|tiny)' "$OUT/bench.log") result lines"
  if "$B/roseinfer" bench --help >/dev/null 2>&1; then
    run_logged cli_bench_seed000 240 "$B/roseinfer" bench --device cuda --model gpt2 \
      --dataset seed000 --mode offline
    tail -n 25 "$OUT/cli_bench_seed000.log"
  fi
fi

echo
echo "== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
grep -E "^(model|gpt2|llama|tiny)" "$OUT/bench.log" 2>/dev/null || true
