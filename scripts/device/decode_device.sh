#!/usr/bin/env bash
# Decode on the GPU machine (bundle-pack/ carried; bundle/*-base are the previous commit's
# binaries), in two phases that fit one device call each:
#   bash scripts/device/decode_device.sh micro  # the GPU tests named in TESTS, the quantized GEMV's and
#                                        # the dequantizer's timing drivers, gpu_bench_cuda decode
#                                        # steps (graphs on) at batch 1, 2 and 4 with the fused
#                                        # RoPE on and off and beside the base binary
#   bash scripts/device/decode_device.sh e2e    # offline benches of llama-1b (batch 1, 8, 256) and
#                                        # llama-8b (1, 8) in bf16 and with --quantize, beside base
#   bash scripts/device/decode_device.sh tests  # every GPU test in the bundle, and compute-sanitizer
#                                        # memcheck and racecheck on the cluster attention's cases
#   bash scripts/device/decode_device.sh peer   # batch-1 grids (base, RoPE unfused, fused), offline
#                                        # batch-1 benches, and the transformers peer on the same
#                                        # random llama-1b and gpt2 (carry .peers too)
# Everything lands in $OUT/<phase>.tgz; the summary is printed last.
set -uo pipefail
PHASE=${1:?phase: micro, e2e, tests or peer}
FINAL=${OUT:-/tmp/decode_out}
OUT=/tmp/decode_work/$PHASE
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

micro() {
  for t in ${TESTS:-kernels gemv_quant dequant backend}; do
    step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
  done
  for b in gemv_quant dequant; do
    [[ -x $B/gpu_bench_$b ]] && step "bench_$b" 240 "$B/gpu_bench_$b" --no-skip
  done
  for round in 1 2; do
    grid "base_$round" "$B/gpu_bench_cuda-base"
    grid "unfused_$round" "$B/gpu_bench_cuda" ROSEINFER_CUDA_FUSED_ROPE=0
    grid "fused_$round" "$B/gpu_bench_cuda"
  done
}

grid() {  # NAME BIN ENV...: gpu_bench_cuda decode steps, graphs on
  local name=$1 bin=$2
  shift 2
  step "$name" 240 env ROSEINFER_BENCH_MODELS=${MODELS:-gpt2,llama-1b,llama-8b} \
    ROSEINFER_BENCH_BATCHES=${BATCHES:-1,2,4} ROSEINFER_BENCH_GRAPHS=on "$@" "$bin" --no-skip
  grep -E "^(gpt2|llama)" "$OUT/$name.txt" | sed "s/^/$name: /" | tee -a "$SUMMARY"
}

bench() {  # NAME BIN ARGS...: one offline bench, its decode tok/s, GB/s and weight types
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
    print(sys.argv[2], "decode_tok_s=%.0f decode_gbps=%.0f floor=%.2f" % (
        m.get("decode_throughput", 0), m.get("decode_gbps", 0), m.get("bandwidth_floor_fraction", 0)),
        d.get("config", {}).get("weights", "?"))
PY
}
e2e_at() {  # MODEL B TYPES...: this build, and the base beside each quantized run
  local model=$1 b=$2
  shift 2
  for q in "$@"; do
    extra=()
    [[ $q != bf16 ]] && extra=(--quantize "$q")
    bench "${model}_b${b}_${q}" "$B/roseinfer" --model "$model" "${extra[@]}" \
      --dataset-name "grid:$b:512:128"
    [[ $q != bf16 ]] && bench "${model}_b${b}_${q}_base" "$B/roseinfer-base" --model "$model" \
      "${extra[@]}" --dataset-name "grid:$b:512:128"
  done
}
e2e() {  # most important first: the deadline skips what is left
  e2e_at llama-8b 1 bf16 q4_k q8_0
  e2e_at llama-1b 1 bf16 q4_k q8_0 q4_0
  e2e_at llama-1b 256 bf16 q8_0 q4_k
  e2e_at llama-1b 8 bf16 q4_k q8_0
  e2e_at llama-8b 8 bf16 q4_k
}
tests() {
  for t in "$B"/gpu_test_*; do step "$(basename "$t")" 300 "$t"; done
  local cases='-tc=*cluster*,*paged attention: decode*'
  step memcheck_cluster_attention 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/gpu_test_cuda_kernels" "$cases"
  step racecheck_cluster_attention 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$B/gpu_test_cuda_kernels" "$cases"
}
peer() {
  BATCHES=1 grid base "$B/gpu_bench_cuda-base"
  BATCHES=1 grid unfused "$B/gpu_bench_cuda" ROSEINFER_CUDA_FUSED_ROPE=0
  BATCHES=1 grid fused "$B/gpu_bench_cuda"
  BATCHES=1 grid base_again "$B/gpu_bench_cuda-base"
  BATCHES=1 grid fused_again "$B/gpu_bench_cuda"
  bench gpt2_b1_bf16 "$B/roseinfer" --model gpt2 --dataset-name grid:1:512:128
  bench gpt2_b1_bf16_base "$B/roseinfer-base" --model gpt2 --dataset-name grid:1:512:128
  e2e_at llama-1b 1 bf16 q4_k
  e2e_at llama-8b 1 bf16 q4_k
  step peer_make_models 240 python3 .peers/make_models.py /tmp/models gpt2 llama1b
  step peer_llama1b_b1 240 python3 .peers/hf_cb_peer.py /tmp/models/llama1b fixed:1:512:128 \
    --json "$OUT/peer_llama1b_b1.json"
  step peer_gpt2_b1 240 python3 .peers/hf_cb_peer.py /tmp/models/gpt2 fixed:1:512:128 \
    --json "$OUT/peer_gpt2_b1.json"
  for name in peer_llama1b_b1 peer_gpt2_b1; do
    python3 - "$OUT/$name.json" "$name" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    p = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
print(sys.argv[2], {k: p.get(k) for k in ("duration_s", "output_throughput", "p50_tpot_ms", "p50_ttft_ms")})
PY
  done
}
case $PHASE in
  micro) micro ;;
  e2e) e2e ;;
  tests) tests ;;
  peer) peer ;;
  *) echo "unknown phase $PHASE" >&2 ;;
esac
tar czf "$FINAL/$PHASE.tgz" -C "$OUT" .
cat "$SUMMARY"
