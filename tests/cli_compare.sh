#!/usr/bin/env bash
# `roseinfer compare` end to end: exit 0 within bounds, 1 on a regression, 2 on usage or file
# errors. Usage: tests/cli_compare.sh path/to/roseinfer
set -u
BIN=${1:?usage: cli_compare.sh ROSEINFER_BINARY}

if ! "$BIN" compare --help >/dev/null 2>&1; then
  echo "skip: $BIN has no compare command yet"
  exit 77
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0

# A results file with two runs. $1: fingerprint, $2: offline output_throughput,
# $3: offline p95_e2el_ms, $4: mode of the second run.
write_results() {
  cat <<EOF
{
  "schema": "roseinfer-bench",
  "schema_version": 1,
  "roseinfer_version": "0.1.0",
  "git_commit": "test",
  "date": "2026-11-20T00:00:00Z",
  "command": "roseinfer bench --mode all",
  "model": "tiny",
  "device": "cpu",
  "config": {"mode": "all", "max_num_seqs": 256},
  "workload": {"name": "seed000", "num_requests": 64, "fingerprint": "$1", "total_input_tokens": 54784},
  "runs": [
    {"mode": "offline", "prefix_cache": true, "completed": 64, "failed": 0, "duration": 2.0,
     "request_throughput": 32, "output_throughput": $2, "total_token_throughput": 27904,
     "median_ttft_ms": 100, "p99_ttft_ms": 200, "median_tpot_ms": 20, "p99_tpot_ms": 40,
     "median_itl_ms": 20, "p99_itl_ms": 45, "p95_e2el_ms": $3},
    {"mode": "$4", "prefix_cache": false, "completed": 64, "failed": 0, "duration": 4.0,
     "request_throughput": 16, "output_throughput": 256, "total_token_throughput": 13952,
     "median_ttft_ms": 300, "p99_ttft_ms": 600, "median_tpot_ms": 30, "p99_tpot_ms": 50,
     "median_itl_ms": 30, "p99_itl_ms": 55, "p95_e2el_ms": 900}
  ]
}
EOF
}

write_results 00ff 512 500 naive >"$TMP/base.json"
write_results 00ff 512 500 naive >"$TMP/same.json"
write_results 00ff 640 450 naive >"$TMP/better.json"
write_results 00ff 460.8 500 naive >"$TMP/worse.json"     # output_throughput -10%
write_results 00ff 500 510 naive >"$TMP/slightly.json"    # -2.3% throughput, +2% p95 E2E
write_results beef 512 500 naive >"$TMP/other.json"       # another workload
write_results 00ff 512 500 online >"$TMP/partial.json"    # only the offline run in common
echo '{"schema": "roseinfer-bench", "schema_version": 1, "runs": [' >"$TMP/broken.json"
echo '{"schema": "vllm-bench", "schema_version": 1}' >"$TMP/vllm.json"
echo '{"schema": "roseinfer-bench", "schema_version": 1, "workload": {"fingerprint": "00ff"},
  "runs": [{"mode": "serve", "prefix_cache": true, "output_throughput": 1}]}' >"$TMP/disjoint.json"

# expect CODE DESCRIPTION ARGS...: runs compare with ARGS and checks its exit code.
expect() {
  local want=$1 what=$2
  shift 2
  "$BIN" compare "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want (roseinfer compare $*)"
    sed 's/^/  out: /' "$TMP/out"
    sed 's/^/  err: /' "$TMP/err"
    failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"
  fi
}
# expect_text FILE TEXT DESCRIPTION: the last command's stdout or stderr mentions TEXT.
expect_text() {
  if ! grep -q -- "$2" "$TMP/$1"; then
    echo "FAIL: $3: '$2' not in $1"
    sed "s/^/  $1: /" "$TMP/$1"
    failures=$((failures + 1))
  fi
}

expect 0 "identical results" "$TMP/base.json" "$TMP/same.json"
expect_text out "within bounds" "identical results say so"
expect 0 "an improvement" "$TMP/base.json" "$TMP/better.json"
expect_text out "improved" "the improvement is named"
expect 1 "a 10% throughput drop" "$TMP/base.json" "$TMP/worse.json"
expect_text out "REGRESSION" "the regression is named"
expect 0 "the drop within --max-regression 20%" "$TMP/base.json" "$TMP/worse.json" --max-regression 20%
expect 0 "the drop within a per-metric threshold" "$TMP/base.json" "$TMP/worse.json" \
  --metric output_throughput:15%
expect 0 "small changes within the default 5%" "$TMP/base.json" "$TMP/slightly.json"
expect 1 "an added metric with a tight threshold" "$TMP/base.json" "$TMP/slightly.json" \
  --metric p95_e2el_ms:1%
expect 0 "only the listed metric" "$TMP/base.json" "$TMP/worse.json" --metrics-only \
  --metric median_ttft_ms
expect 2 "different workloads" "$TMP/base.json" "$TMP/other.json"
expect_text err "--force" "the refusal says how to override it"
expect 0 "different workloads with --force" "$TMP/base.json" "$TMP/other.json" --force
expect 0 "runs matched by mode and cache" "$TMP/base.json" "$TMP/partial.json"
expect_text out "only in" "unmatched runs are listed"
expect 2 "no run in common" "$TMP/base.json" "$TMP/disjoint.json"
expect 2 "a missing file" "$TMP/base.json" "$TMP/nope.json"
expect_text err "nope.json" "the missing file is named"
expect 2 "malformed JSON" "$TMP/broken.json" "$TMP/base.json"
expect 2 "another tool's JSON" "$TMP/base.json" "$TMP/vllm.json"
expect 2 "an unknown metric" "$TMP/base.json" "$TMP/same.json" --metric output_thruput
expect 2 "a bad threshold" "$TMP/base.json" "$TMP/same.json" --max-regression lots
expect 2 "one file only" "$TMP/base.json"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all compare CLI checks passed"
