#!/usr/bin/env bash
# Overlapped steps on the benchmark workloads (llama-1b: seed000 every mode, nano256, serve online),
# --no-overlap against the default, one run each (bundle-pack/ carried). $OUT: the JSON and a
# line per run.
set -uo pipefail
export OUT; source scripts/device_step.sh; device_begin /tmp/wl >/dev/null
for ds in seed000 nano256 serve; do
  mode=all; [[ $ds == serve ]] && mode=online
  for v in no_overlap new; do
    a=(); [[ $v == no_overlap ]] && a=(--no-overlap)
    step "${ds}_$v" 200 "$B/roseinfer" bench --device cuda --model llama-1b --dataset-name "$ds" --mode "$mode" "${a[@]}" --json "$OUT/${ds}_$v.json" >/dev/null
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f))
    for r in d["runs"]:
        m = r.get("metrics", r)
        print(os.path.basename(f)[:-5], r.get("mode", m.get("mode")), "out_tok_s=%.0f ttft_p50=%.1f tpot_p50=%.2f steps_ahead=%s duration=%.3f" % (m.get("output_throughput", 0), m.get("median_ttft_ms", m.get("p50_ttft_ms", 0)), m.get("median_tpot_ms", m.get("p50_tpot_ms", 0)), m.get("steps_ahead"), m.get("duration", 0)))
PY
