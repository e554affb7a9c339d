#!/usr/bin/env bash
# Small steps on the GPU machine, this build beside the previous commit's (bundle/*-base, carried in
# bundle-pack/): GPU tests (TESTS="kernels backend ..." picks them, TESTS="" none), gpu_bench_cuda's
# grid at batch 1 (gpt2, llama-1b), seed000 (gpt2, offline, cache) over 5 runs in one process,
# prefix groups, nano256 and grid B=64 on llama-1b, and seed000's first run in a fresh process.
# Run from the repository root; everything lands in $OUT/small.tgz, the summary is printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/b1_out}
OUT=/tmp/b1_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
TESTS=${TESTS:-"kernels backend engine batch_invariance"}
for t in $TESTS; do step "gpu_test_cuda_$t" 240 "$B/gpu_test_cuda_$t"; done

grid_b1() {  # NAME BIN ENV...: gpu_bench_cuda at batch 1, graphs on, gpt2 and llama-1b
  local name=$1 bin=$2
  shift 2
  step "$name" 120 env ROSEINFER_BENCH_MODELS=${MODELS:-gpt2,llama-1b} ROSEINFER_BENCH_BATCHES=1 \
    ROSEINFER_BENCH_GRAPHS=on "$@" "$bin" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}
grid_b1 base "$B/gpu_bench_cuda-base"
grid_b1 new "$B/gpu_bench_cuda"
grid_b1 base_again "$B/gpu_bench_cuda-base"
grid_b1 new_again "$B/gpu_bench_cuda"

seed() {  # NAME BIN ENV...: seed000 offline with the cache, 5 runs in one process
  local name=$1 bin=$2
  shift 2
  step "$name" 120 env "$@" "$bin" bench --model gpt2 --device cuda --dataset-name seed000 \
    --mode offline --repeat 5 --json "$OUT/$name.json"
  python3 - "$OUT/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
for r in d.get("runs", []):
    m = r.get("metrics", r)
    sp = r.get("spread", {}).get("duration", {})
    print(sys.argv[2], "duration_ms=%.2f (min %.2f max %.2f) ttft_ms=%.2f tpot_ms=%.3f" % (
        1e3 * m["duration"], 1e3 * sp.get("min", 0), 1e3 * sp.get("max", 0), m["p50_ttft_ms"],
        m["p50_tpot_ms"]))
PY
}
seed seed000_base "$B/roseinfer-base"
seed seed000_new "$B/roseinfer"
seed seed000_base_again "$B/roseinfer-base"
seed seed000_new_again "$B/roseinfer"
bench_once() {  # NAME BIN ARGS...: one offline bench, its headline figures
  local name=$1 bin=$2
  shift 2
  step "$name" 150 "$bin" bench --device cuda --mode offline "$@" --json "$OUT/$name.json"
  python3 - "$OUT/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
for r in d.get("runs", []):
    m = r.get("metrics", r)
    print(sys.argv[2], "duration_ms=%.1f output_tok_s=%.0f decode_tok_s=%.0f tpot_ms=%.3f hit=%.3f" % (
        1e3 * m["duration"], m["output_throughput"], m.get("decode_throughput", 0),
        m["p50_tpot_ms"], m.get("prefix_cache_hit_rate", 0)))
PY
}
PG="--dataset-name prefix-groups:4:64:1024 --max-num-seqs 256 --max-num-batched-tokens 16384"
bench_once groups_llama1b_base "$B/roseinfer-base" --model llama-1b $PG
bench_once groups_llama1b_new "$B/roseinfer" --model llama-1b $PG
NANO="--dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384"
bench_once nano256_base "$B/roseinfer-base" --model llama-1b $NANO
bench_once nano256_new "$B/roseinfer" --model llama-1b $NANO
G64="--dataset-name grid:64:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384"
bench_once grid64_base "$B/roseinfer-base" --model llama-1b $G64
bench_once grid64_new "$B/roseinfer" --model llama-1b $G64
for bin in base new; do  # a single run in a fresh process: the first run pays first-use costs
  suffix=""
  [[ $bin == base ]] && suffix="-base"
  bench_once "seed000_first_$bin" "$B/roseinfer$suffix" --model gpt2 --dataset-name seed000
done
tar czf "$FINAL/small.tgz" -C "$OUT" .
cat "$SUMMARY"
