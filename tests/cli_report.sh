#!/usr/bin/env bash
# `roseinfer report` end to end: a detailed bench run on the tiny preset and the committed GPU
# results become self-contained pages; bad input exits 2 naming the file.
# Usage: tests/cli_report.sh path/to/roseinfer
source "$(dirname "$0")/cli-common.bash"

"$BIN" bench datasets/sample.jsonl "${COMMON[@]}" --mode all --save-detailed \
  --json "$TMP/detailed.json" >/dev/null 2>&1
check "bench --save-detailed writes first_scheduled and per-step samples" \
  grep -q '"first_scheduled"' "$TMP/detailed.json"
check "... and step_kv_used_blocks" grep -q '"step_kv_used_blocks": \[[0-9]' "$TMP/detailed.json"

check "report of a detailed run exits 0" "$BIN" report "$TMP/detailed.json" -o "$TMP/detailed.html"
for chart in cdf-TTFT-0 cdf-ITL-0 throughput-0 cache-kv-0 timeline-0-0 timeline-0-1 timeline-0-2 \
  steps-0-2-kv steps-0-2-queue; do
  check "chart $chart is drawn" grep -q "data-chart=\"$chart\"" "$TMP/detailed.html"
done
check "no external reference" bash -c "! grep -Eq 'https?://|<script|src=|@import|url\\(' '$TMP/detailed.html'"
check "no temporary file left" bash -c "! ls '$TMP'/*.tmp.* 2>/dev/null"

"$BIN" bench --dataset-name grid:3:24:3 "${COMMON[@]}" --sweep request-rate=8,inf \
  --slo ttft=100000 --json "$TMP/sweep.json" >/dev/null 2>&1
check "report of a sweep exits 0" "$BIN" report "$TMP/sweep.json" -o "$TMP/sweep.html"
check "... draws the TTFT-throughput curve" grep -q 'data-chart="sweep-TTFT"' "$TMP/sweep.html"
check "... with one point per sweep point" \
  grep -qE 'data-series="sweep.json p50" points="[0-9.]+,[0-9.]+ [0-9.]+,[0-9.]+ "' "$TMP/sweep.html"
check "... and the highest rate meeting a loose SLO ringed" \
  grep -q 'highest request_rate meeting the SLO: inf' "$TMP/sweep.html"

R=results/2026-11-21-h100
check "committed GPU results side by side" \
  "$BIN" report $R/seed000.json $R/serve_rate_8.json $R/serve_rate_inf.json -o "$TMP/gpu.html"
check "... one TTFT chart per file" bash -c "[ \$(grep -c 'data-chart=\"cdf-TTFT-' '$TMP/gpu.html') = 3 ]"

echo '{"schema": "roseinfer-bench", "schema_version": 1, "runs": []}' >"$TMP/bad.json"
"$BIN" report "$TMP/bad.json" -o "$TMP/bad.html" 2>"$TMP/err"
check "a bad results file exits 2" test $? -eq 2
check "... naming the file and field" grep -q "bad.json: missing field 'workload'" "$TMP/err"
check "... and writes nothing" test ! -e "$TMP/bad.html"
"$BIN" report -o "$TMP/none.html" 2>/dev/null
check "no input file exits 2" test $? -eq 2
"$BIN" report "$TMP/missing.json" -o "$TMP/none.html" 2>/dev/null
check "a missing file exits 2" test $? -eq 2

finish report
