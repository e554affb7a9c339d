#!/usr/bin/env bash
# End to end: `roseinfer bench` on the tiny preset (CPU). $1 is the binary. Exit 77: not built yet.
source "$(dirname "$0")/cli-common.bash"

# 1. A prompt file, every mode: tables on stdout, results JSON with vLLM-style keys.
"$BIN" bench datasets/sample.jsonl --mode all --json "$TMP/all.json" "${COMMON[@]}" \
  >"$TMP/all.out" 2>"$TMP/all.err"
check "bench --mode all exits 0" [ $? -eq 0 ]
for mode in naive offline online; do
  check "a table for $mode" grep -q "== $mode, " "$TMP/all.out"
  check "a JSON run for $mode" grep -q "\"mode\": *\"$mode\"" "$TMP/all.json"
done
check "a side-by-side summary" grep -q "summary" "$TMP/all.out"
for key in schema schema_version git_commit model device config workload fingerprint runs \
    completed failed duration total_input_tokens total_output_tokens request_throughput \
    output_throughput total_token_throughput mean_ttft_ms median_ttft_ms p99_ttft_ms \
    mean_tpot_ms p95_tpot_ms p99_itl_ms mean_e2el_ms; do
  check "JSON has \"$key\"" grep -q "\"$key\":" "$TMP/all.json"
done
check "schema is roseinfer-bench" grep -q '"schema": *"roseinfer-bench"' "$TMP/all.json"
check "no request failed" [ "$(grep -c '"failed": *0' "$TMP/all.json")" -eq 3 ]
check "no progress output when stderr is not a terminal" [ -z "$(tr -d -c '\r' <"$TMP/all.err")" ]
check "no temporary file left" [ -z "$(ls "$TMP" | grep '\.tmp\.')" ]

# 2. A synthetic workload with the cache on and off, per-request detail, percentiles and SLOs.
"$BIN" bench --dataset-name grid:4:40:5 --both-cache-settings --save-detailed \
  --percentiles 50,90 --slo ttft=100000,e2el=100000 --json "$TMP/grid.json" "${COMMON[@]}" \
  >"$TMP/grid.out" 2>/dev/null
check "grid bench exits 0" [ $? -eq 0 ]
check "two runs (cache on and off)" [ "$(grep -c '"prefix_cache": *\(true\|false\)' "$TMP/grid.json")" -eq 2 ]
check "detail arrays with --save-detailed" grep -q '"ttfts":' "$TMP/grid.json"
check "chosen percentile p90 is written" grep -q '"p90_ttft_ms":' "$TMP/grid.json"
check "goodput with --slo" grep -q '"request_goodput":' "$TMP/grid.json"
check "grid: 4 x 40 input tokens" grep -q '"total_input_tokens": *160' "$TMP/grid.json"
check "grid: 4 x 5 output tokens" grep -q '"total_output_tokens": *20' "$TMP/grid.json"
# The CPU backend runs one step at a time: no step went ahead, whatever --no-overlap says.
check "overlap is on unless --no-overlap" grep -q '"overlap": *true' "$TMP/grid.json"
check "no step ahead on the CPU" [ "$(grep -c '"steps_ahead": *0' "$TMP/grid.json")" -eq 2 ]
"$BIN" bench --dataset-name grid:2:20:3 --no-overlap --json "$TMP/no_overlap.json" "${COMMON[@]}" \
  >/dev/null 2>&1
check "--no-overlap is recorded" grep -q '"overlap": *false' "$TMP/no_overlap.json"
check "no copy bandwidth measured on the CPU" grep -q '"copy_bandwidth_source": *null' "$TMP/grid.json"
"$BIN" bench --dataset-name grid:1:20:3 --copy-bandwidth-gbps 250 --json "$TMP/floor.json" \
  "${COMMON[@]}" >"$TMP/floor.out" 2>/dev/null
check "a given copy bandwidth is said and recorded" grep -q "copy bandwidth: 250 GB/s (given)" "$TMP/floor.out"
check "a given copy bandwidth is recorded as given" grep -q '"copy_bandwidth_source": *"given"' "$TMP/floor.json"
check "its floor fraction is decode GB/s over it" python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
sys.exit(abs(run["bandwidth_floor_fraction"] - run["decode_gbps"] / 250) > 1e-9)' "$TMP/floor.json"

# 3. seed000's shared prompt hits the prefix cache; the same seed gives the same fingerprint.
"$BIN" bench --dataset-name seed000 --num-prompts 6 --json "$TMP/s1.json" "${COMMON[@]}" >/dev/null 2>&1
"$BIN" bench --dataset-name seed000 --num-prompts 6 --json "$TMP/s2.json" "${COMMON[@]}" >/dev/null 2>&1
fp() { grep -o '"fingerprint": *"[0-9a-f]*"' "$1"; }
check "same workload, same fingerprint" [ "$(fp "$TMP/s1.json")" == "$(fp "$TMP/s2.json")" ]
"$BIN" bench --dataset-name seed000 --num-prompts 6 --seed 1 --json "$TMP/s3.json" "${COMMON[@]}" >/dev/null 2>&1
check "another seed, another fingerprint" [ "$(fp "$TMP/s1.json")" != "$(fp "$TMP/s3.json")" ]
hits=$(grep -o '"prefix_cache_hit_tokens": *[0-9]*' "$TMP/s1.json" | grep -o '[0-9]*$')
check "seed000 hits the prefix cache (hit tokens ${hits:-none} > 0)" [ "${hits:-0}" -gt 0 ]

# 4. Online with Poisson and bursty arrivals, a concurrency cap and warm-up.
"$BIN" bench --dataset-name random --num-prompts 6 --random-input-len 24 --random-output-len 4 \
  --random-range-ratio 0.5 --mode online --request-rate 200 --burstiness 0.5 --max-concurrency 2 \
  --warmup 2 --json "$TMP/online.json" "${COMMON[@]}" >"$TMP/online.out" 2>/dev/null
check "online bench exits 0" [ $? -eq 0 ]
check "warm-up requests are not counted" grep -q '"completed": *6,' "$TMP/online.json"
check "arrivals are described" grep -q "200 req/s, burstiness 0.5, at most 2 in flight" "$TMP/online.out"

# 7. --format md and csv print only tables on stdout, for pasting into a PR or loading as a CSV
# file; the human header lines go to stderr. A bad format is a usage error.
csv_fields() {  # the field count of each line, commas inside double quotes not counted
  awk '{ n = 1; q = 0; for (i = 1; i <= length($0); i++) { c = substr($0, i, 1);
    if (c == "\"") q = !q; else if (c == "," && !q) n++ } print n }'
}
md_only() {  # every line is blank, a heading, a table row or a bold note
  ! grep -vqE '^$|^#{1,6} |^\|.*\|$|^\*\*.*\*\*$' "$1"
}
"$BIN" bench --dataset-name grid:2:20:3 --mode all --format md "${COMMON[@]}" >"$TMP/md.out" 2>"$TMP/md.err"
check "bench --format md exits 0" [ $? -eq 0 ]
check "markdown heading and table" grep -q '^### offline, prefix cache on' "$TMP/md.out"
check "markdown separator row" grep -q '^|[- |:]*|$' "$TMP/md.out"
check "markdown summary table" grep -q '^| output tok/s |' "$TMP/md.out"
check "md stdout is only headings, tables and bold notes" md_only "$TMP/md.out"
check "md: the human header goes to stderr" grep -q '^roseinfer bench: 2 requests' "$TMP/md.err"
"$BIN" bench --dataset-name grid:2:20:3 --mode all --both-cache-settings --format csv \
  "${COMMON[@]}" >"$TMP/csv.out" 2>"$TMP/csv.err"
check "bench --format csv exits 0" [ $? -eq 0 ]
check "csv: the first line is the header" \
  grep -q '^mode,prefix_cache,repeats,completed,failed,.*,output_throughput,.*,p99_ttft_ms,' \
  <(head -n 1 "$TMP/csv.out")
check "csv: one header row" [ "$(grep -c 'mode' "$TMP/csv.out")" -eq 1 ]
check "csv: one row per run (6) and nothing else" [ "$(wc -l <"$TMP/csv.out")" -eq 7 ]
check "csv: every row has the header's field count" \
  [ "$(csv_fields <"$TMP/csv.out" | sort -u | wc -l)" -eq 1 ]
check "csv: rows are mode, cache setting, plain numbers" \
  [ "$(grep -cE '^(naive|offline|online),(true|false),1,2,0,40,6,[0-9.e+-]+,' "$TMP/csv.out")" -eq 6 ]
check "csv: the human header goes to stderr" grep -q '^roseinfer bench: 2 requests' "$TMP/csv.err"
"$BIN" bench --dataset-name grid:2:20:3 --format xml "${COMMON[@]}" >/dev/null 2>&1
check "bench --format xml is a usage error (exit 2)" [ $? -eq 2 ]

# 8. --repeat 3: medians plus spread in the JSON and a spread table; compare reads repeated results
# (the noise rule itself is tested on synthetic spreads in test_repeat: wall-clock timings of two
# runs on this shared 2-core CPU, under a parallel ctest, move more than 3 repeats can measure, so
# this script only requires a verdict, not "no regression", between two real runs).
for i in 1 2; do
  "$BIN" bench --dataset-name seed000 --num-prompts 4 --repeat 3 --json "$TMP/rep$i.json" \
    "${COMMON[@]}" >"$TMP/rep$i.out" 2>/dev/null
  check "bench --repeat 3 run $i exits 0" [ $? -eq 0 ]
done
check "JSON says repeats 3" grep -q '"repeats": *3' "$TMP/rep1.json"
check "JSON has a spread of request_throughput" grep -q '"spread":' "$TMP/rep1.json"
check "a spread table" grep -q '== spread over 3 runs ==' "$TMP/rep1.out"
check "spread table shows a 95% interval" grep -q 'request_throughput .*\[.*, .*\]' "$TMP/rep1.out"
"$BIN" compare "$TMP/rep1.json" "$TMP/rep2.json" >"$TMP/repcmp.out" 2>&1
rc=$?
check "compare of two repeated runs gives a verdict (exit 0 or 1)" [ $rc -eq 0 -o $rc -eq 1 ]
"$BIN" compare "$TMP/rep1.json" "$TMP/rep1.json" >/dev/null 2>&1
check "a repeated result compared with itself is no regression (exit 0)" [ $? -eq 0 ]
"$BIN" bench --dataset-name seed000 --repeat 0 "${COMMON[@]}" >/dev/null 2>&1
check "bench --repeat 0 is a usage error (exit 2)" [ $? -eq 2 ]

# 9. --sweep request-rate: one online run per point, a sweep table, the highest rate meeting the
# SLO, and every point in the JSON's sweep section; bad sweep specs are usage errors.
"$BIN" bench --dataset-name seed000 --num-prompts 4 --sweep request-rate=2,inf \
  --slo ttft=100000 --json "$TMP/sweep.json" "${COMMON[@]}" >"$TMP/sweep.out" 2>/dev/null
check "bench --sweep exits 0" [ $? -eq 0 ]
check "a sweep table" grep -q '== sweep over request_rate' "$TMP/sweep.out"
check "a row per point" [ "$(grep -cE '^  (2\.000|inf) ' "$TMP/sweep.out")" -eq 2 ]
check "the highest rate meeting a loose SLO is inf" \
  grep -q 'highest request_rate meeting the SLO: inf' "$TMP/sweep.out"
check "two online runs in the JSON" [ "$(grep -c '"mode": *"online"' "$TMP/sweep.json")" -eq 2 ]
check "sweep section with its values" grep -q '"values": *\[2, null\]' "$TMP/sweep.json"
"$BIN" bench --dataset-name seed000 --num-prompts 4 --sweep max-concurrency=1,2 --slo ttft=0.001 \
  "${COMMON[@]}" >"$TMP/sweepc.out" 2>/dev/null
check "bench --sweep max-concurrency exits 0" [ $? -eq 0 ]
check "an impossible SLO is met by no point" grep -q 'no max_concurrency met the SLO' "$TMP/sweepc.out"
"$BIN" bench --dataset-name seed000 --num-prompts 2 --sweep request-rate=4,inf --slo ttft=100000 \
  --format md "${COMMON[@]}" >"$TMP/sweep.md" 2>/dev/null
check "a markdown sweep: heading, table, verdict" grep -q '^\*\*highest request_rate meeting' "$TMP/sweep.md"
check "... and nothing else" md_only "$TMP/sweep.md"
"$BIN" bench --dataset-name seed000 --num-prompts 2 --sweep request-rate=4,inf --slo ttft=100000 \
  --format csv "${COMMON[@]}" >"$TMP/sweep.csv" 2>/dev/null
check "a CSV sweep: the point and the SLO verdict lead the header" \
  grep -q '^request_rate,mode,prefix_cache,repeats,meets_slo,' <(head -n 1 "$TMP/sweep.csv")
check "... one row per point" [ "$(grep -cE '^(4|inf),online,true,1,true,' "$TMP/sweep.csv")" -eq 2 ]
check "... and nothing else" [ "$(wc -l <"$TMP/sweep.csv")" -eq 3 ]
for bad in request-rate=0 max-concurrency=1.5 tokens=1 request-rate=; do
  "$BIN" bench --dataset-name seed000 --sweep "$bad" "${COMMON[@]}" >/dev/null 2>&1
  check "--sweep $bad is a usage error (exit 2)" [ $? -eq 2 ]
done

finish cli_bench
