#!/usr/bin/env bash
# Issue 12 on the GPU machine (weights kept quantized, batch-1 decode), in phases that fit one
# device call each, run from the repository root with bundle-pack/ carried (the bundle holds
# bundle/roseinfer-base, the previous commit's binary, for side-by-side figures):
#   bash scripts/device/issue12_device.sh tests   # every GPU test in the bundle
#   bash scripts/device/issue12_device.sh bench   # grids: base vs this commit, bf16 vs --quantize
#   bash scripts/device/issue12_device.sh real    # after scripts/model_parts.sh stage 1, 2 and 3 in the calls before;
#                                          # carry .model-part4 and .device-extra (the gguf wheel):
#                                          # the SmolLM2 GGUF kept quantized, its GPU test, grids,
#                                          # and transformers' batch-1 decode on the same file
# Outputs land in $OUT/<phase>.tgz with a summary printed last.
set -uo pipefail
PHASE=${1:?phase: tests, bench or real}
FINAL=${OUT:-/tmp/issue12_out}
OUT=/tmp/issue12_work/$PHASE
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin

figures() {  # NAME JSON: decode/prefill throughput, GB/s and % of floor, and the weight types
  python3 - "$1" "$2" <<'PY' | tee -a "$OUT/figures.txt"
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{name}: no result ({e})"); sys.exit()
cfg = dict(d.get("config", {})) if isinstance(d.get("config"), dict) else {}
for r in d.get("runs", []):
    m = r.get("metrics", r)
    keys = ["decode_throughput", "prefill_throughput", "output_throughput", "decode_gbps",
            "bandwidth_floor_fraction", "p50_tpot_ms"]
    vals = " ".join(f"{k}={m[k]:.6g}" for k in keys if isinstance(m.get(k), (int, float)))
    print(f"{name} {vals} weights={cfg.get('weights', '?')}")
PY
}

# A device call ends at 600 s and brings back only what was archived: later steps are skipped
# once $DEADLINE seconds have gone, so the archive is always written.
DEADLINE=${DEADLINE:-540}
bench() {  # NAME BIN ARGS...: one offline bench with its JSON and figures line
  local name=$1 bin=$2
  shift 2
  if ((SECONDS > DEADLINE)); then
    echo "$name: skipped (past ${DEADLINE}s)" | tee -a "$SUMMARY"
    return 0
  fi
  step "$name" 150 "$bin" bench --device cuda --mode offline "$@" --json "$OUT/$name.json"
  figures "$name" "$OUT/$name.json"
}

case $PHASE in
  tests)
    for t in "$B"/gpu_test_*; do step "$(basename "$t")" 240 "$t"; done
    ;;
  bench)
    # Most important first: the deadline skips what is left.
    grid_for() { echo --dataset-name "grid:$1:512:128" --max-num-seqs 256 --max-num-batched-tokens 16384; }
    llama1b_at() {  # B VARIANTS...
      local b=$1
      shift
      for v in "$@"; do
        case $v in
          base) bench "llama1b_b${b}_base" "$B/roseinfer-base" --model llama-1b $(grid_for "$b") ;;
          bf16) bench "llama1b_b${b}_bf16" "$B/roseinfer" --model llama-1b $(grid_for "$b") ;;
          *) bench "llama1b_b${b}_$v" "$B/roseinfer" --model llama-1b --quantize "$v" $(grid_for "$b") ;;
        esac
      done
    }
    llama1b_at 1 base bf16 q8_0 q4_0 q4_k
    bench gpt2_b1_base "$B/roseinfer-base" --model gpt2 $(grid_for 1)
    bench gpt2_b1_bf16 "$B/roseinfer" --model gpt2 $(grid_for 1)
    bench gpt2_b1_q4_k "$B/roseinfer" --model gpt2 --quantize q4_k $(grid_for 1)
    for q in bf16 q8_0 q4_k; do
      extra=()
      [[ $q != bf16 ]] && extra=(--quantize $q)
      bench "llama8b_b1_$q" "$B/roseinfer" --model llama-8b "${extra[@]}" \
        --dataset-name grid:1:512:128 --max-model-len 4096
    done
    llama1b_at 256 base bf16 q4_k q8_0
    bench nano256_llama1b_base "$B/roseinfer-base" --model llama-1b --dataset-name nano256 \
      --max-num-seqs 256 --max-num-batched-tokens 16384
    bench nano256_llama1b_new "$B/roseinfer" --model llama-1b --dataset-name nano256 \
      --max-num-seqs 256 --max-num-batched-tokens 16384
    bench seed000_gpt2_base "$B/roseinfer-base" --model gpt2 --dataset-name seed000
    bench seed000_gpt2_new "$B/roseinfer" --model gpt2 --dataset-name seed000
    bench gpt2_b256_base "$B/roseinfer-base" --model gpt2 $(grid_for 256)
    bench gpt2_b256_bf16 "$B/roseinfer" --model gpt2 $(grid_for 256)
    for b in 16 64; do llama1b_at $b bf16 q8_0 q4_0 q4_k; done
    llama1b_at 256 q4_0
    ;;
  real)
    MODEL=$({ scripts/model_parts.sh stage 4 >&2 && scripts/model_parts.sh join; } 2>"$OUT/stage2.txt") || MODEL=""
    cat "$OUT/stage2.txt"
    [[ -n $MODEL ]] || { echo "no model"; exit 1; }
    ROSEINFER_MODEL_CACHE=$(dirname "$MODEL") step gpu_test_cuda_real_quantized 240 \
      "$B/gpu_test_cuda_real_quantized" -s
    for t in gpu_test_cuda_backend gpu_test_cuda_dequant; do  # when the bundle holds them
      [[ -x $B/$t ]] && step "$t" 200 "$B/$t"
    done
    ROSEINFER_CUDA_STATS=1 step load_quantized 60 "$B/roseinfer" run datasets/sample.jsonl \
      --model "$MODEL" --max-tokens 8 -o "$OUT/sample_quantized.jsonl"
    for b in 1 256; do
      grid=(--model "$MODEL" --dataset-name "grid:$b:512:128" --max-num-seqs 256
        --max-num-batched-tokens 16384)
      bench "smollm2_b${b}_q4_1" "$B/roseinfer" "${grid[@]}"
      bench "smollm2_b${b}_bf16" "$B/roseinfer" "${grid[@]}" --dtype bf16
      [[ -x $B/roseinfer-base ]] && bench "smollm2_b${b}_base" "$B/roseinfer-base" "${grid[@]}"
    done
    if ls .device-extra/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .device-extra/*.whl && export PYTHONPATH=/tmp/site
    fi
    step peer_decode_b1 200 python3 scripts/peer_decode_b1.py "$MODEL" --json "$OUT/peer_decode_b1.json"
    tail -n 4 "$OUT/peer_decode_b1.txt"
    # The synthetic presets beside transformers on random checkpoints of the same shapes (carry
    # .peers: ../shared/peers).
    if [[ -f .peers/make_models.py ]]; then
      peer_b1 llama1b gpt2
      bench llama1b_b1_bf16 "$B/roseinfer" --model llama-1b --dataset-name grid:1:512:128
      bench llama1b_b1_q4_k "$B/roseinfer" --model llama-1b --quantize q4_k \
        --dataset-name grid:1:512:128
      bench gpt2_b1_bf16 "$B/roseinfer" --model gpt2 --dataset-name grid:1:512:128
    fi
    ;;
esac
tar czf "$FINAL/$PHASE.tgz" -C "$OUT" .
echo "== summary ($PHASE)"
cat "$SUMMARY"
