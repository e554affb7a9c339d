#!/usr/bin/env bash
# Where a batch-1 decode step of one model goes on one GPU (issue 13's TP=2 target needs the
# per-layer fixed costs down, issue 12's batch-1 work): the same bench with each kernel class left
# out in the graph (ROSEINFER_CUDA_SKIP: outputs wrong, step time real) and with the packed
# tensor-core decode attention (ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=1). From the repository root with
# bundle-pack/ carried; MODEL (default llama-8b). A table of decode step times is printed.
set -uo pipefail
FINAL=${OUT:-/tmp/b1_out}
OUT=/tmp/b1_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
MODEL=${MODEL:-llama-8b}
A=(bench --device cuda --model "$MODEL" --dataset-name grid:1:512:128 --max-num-seqs 64 --mode offline)
step default 200 "$B/roseinfer" "${A[@]}" --json "$OUT/default.json"
for skip in norm rope attention gemv norm,rope,attention; do
  step "skip_${skip//,/_}" 200 env ROSEINFER_CUDA_SKIP="$skip" "$B/roseinfer" "${A[@]}" \
    --json "$OUT/skip_${skip//,/_}.json"
done
step tc_decode 200 env ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=1 "$B/roseinfer" "${A[@]}" --json "$OUT/tc_decode.json"
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
print("| run | decode step ms | decode tok/s |")
print("|---|---|---|")
for path in sorted(glob.glob(f"{sys.argv[1]}/*.json")):
    r = json.load(open(path))["runs"][0]
    steps = r.get("decode_steps") or 0
    print(f"| {os.path.basename(path)[:-5]} | {1e3 * r['decode_time_s'] / steps:.3f} | {r['decode_throughput']:.0f} |")
PY
cat "$SUMMARY"
tar czf "$FINAL/b1.tgz" -C "$OUT" .
