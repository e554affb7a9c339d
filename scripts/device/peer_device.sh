#!/usr/bin/env bash
# This build beside the transformers peer (continuous batching, paged sdpa) on the same random
# models in one call: seed000 on gpt2 and batch-1 decode (512-token prompt, 128 outputs) on
# llama-1b. Carry ["bundle-pack", ".peers"]; output in $OUT/peer.tgz, summary printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/peer_out}
OUT=/tmp/peer_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step roseinfer_seed000 120 "$B/roseinfer" bench --model gpt2 --device cuda --dataset-name seed000 \
  --mode all --both-cache-settings --json "$OUT/roseinfer_seed000.json"
step roseinfer_b1 120 "$B/roseinfer" bench --model llama-1b --device cuda \
  --dataset-name grid:1:512:128 --mode offline --json "$OUT/roseinfer_b1.json"
step peer_make_models 240 python3 .peers/make_models.py /tmp/models gpt2 llama1b
step peer_seed000 240 python3 .peers/hf_cb_peer.py /tmp/models/gpt2 seed000 --json "$OUT/peer_seed000.json"
step peer_b1 240 python3 .peers/hf_cb_peer.py /tmp/models/llama1b fixed:1:512:128 --json "$OUT/peer_b1.json"
python3 - "$OUT" <<'PY' | tee -a "$SUMMARY"
import json, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(f"{out}/{name}.json"))
    except Exception as e:
        return {"error": str(e)}
r = load("roseinfer_seed000")
for run in r.get("runs", []):
    print("roseinfer seed000 %s/%s: %.1f ms" % (run["mode"], "cache" if run["prefix_cache"] else "nocache", 1e3 * run["duration"]))
b = load("roseinfer_b1")
for run in b.get("runs", []):
    print("roseinfer llama-1b B=1: decode %.0f tok/s, TPOT p50 %.3f ms" % (run["decode_throughput"], run["p50_tpot_ms"]))
for name in ("peer_seed000", "peer_b1"):
    p = load(name)
    print(name, {k: p.get(k) for k in ("duration_s", "output_throughput", "p50_ttft_ms", "p50_tpot_ms", "error") if k in p})
PY
tar czf "$FINAL/peer.tgz" -C "$OUT" .
cat "$SUMMARY"
