#!/usr/bin/env bash
# One build-test-measure cycle on the GPU machine (the second of two calls; the first ran
# `scripts/model_parts.sh stage 1` and `stage 2` carrying .model-part1 and .model-part2). Carry [".model-part3", "bundle-pack"] and
# run from the repository root:
#   bash scripts/device/session_device.sh
# (The bundle archive must stay small: see scripts/model_parts.sh.)
# 1. the real SmolLM2 GGUF joined in /tmp (scripts/model_parts.sh stage 3, then join);
# 2. every GPU test in the bundle, and compute-sanitizer memcheck on the device dequantization;
# 3. the real model: the 14 chat prompts greedy, loading through the device dequantization, with
#    ROSEINFER_CUDA_STATS=1 for the load line; token ids compared with the committed run of the
#    host-dequantization path (results/2026-11-23-h100/real_model/ours_chat.jsonl) and with
#    transformers bf16 (peer_chat.json of the same results); decode grid B=1 on it;
# 4. scripts/noise_study.sh and scripts/serve_sweep.sh (issue 15).
# Everything lands in $OUT/session.tgz (the device tool brings back only a few files); a summary is
# printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/session_out}
OUT=/tmp/session_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
BIN=$B/roseinfer

MODEL=$({ scripts/model_parts.sh stage 3 >&2 && scripts/model_parts.sh join; } 2>"$OUT/stage2.txt") || MODEL=""
cat "$OUT/stage2.txt"

for t in "$B"/gpu_test_*; do step "$(basename "$t")" 240 "$t"; done
if command -v compute-sanitizer >/dev/null; then
  step memcheck_dequant 180 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu_test_cuda_dequant"
fi

PREV=results/2026-11-23-h100/real_model
if [[ -n $MODEL ]]; then
  ROSEINFER_CUDA_STATS=1 step real_chat 120 "$BIN" run "$PREV/chat_greedy.jsonl" --model "$MODEL" \
    --device cuda -o "$OUT/real_chat.jsonl"
  grep -i "load\|dequant\|decoded" "$OUT/real_chat.txt" | head -5
  python3 -c '
import json, sys
load = lambda p: {r["id"]: r.get("token_ids") for r in (json.loads(l) for l in open(p) if l.strip())}
a, b = load(sys.argv[1]), load(sys.argv[2])
same = sum(1 for k in a if a[k] == b.get(k))
print(f"device-dequant run vs host-dequant run: {same} of {len(a)} requests with identical token ids")
for k in a:
    if a[k] != b.get(k): print("differs:", k)
' "$PREV/ours_chat.jsonl" "$OUT/real_chat.jsonl" | tee "$OUT/real_vs_host_path.txt"
  python3 scripts/compare_greedy.py "$OUT/real_chat.jsonl" "$PREV/peer_chat.json" --markdown \
    >"$OUT/greedy_compare.md" 2>&1
  tail -n 4 "$OUT/greedy_compare.md"
  step grid_smollm2_b1 120 "$BIN" bench --model "$MODEL" --device cuda \
    --dataset-name grid:1:512:128 --mode offline --json "$OUT/grid_smollm2_b1.json"
fi

step noise_study 300 env OUT="$OUT/noise" BUNDLE_DIR="$B" bash scripts/noise_study.sh
step serve_sweep 240 env OUT="$OUT/sweep" BUNDLE_DIR="$B" bash scripts/serve_sweep.sh
tar czf "$FINAL/session.tgz" -C "$OUT" .
cp "$SUMMARY" "$FINAL/summary.txt"
echo "== summary"
cat "$SUMMARY"
