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

finish cli_bench
