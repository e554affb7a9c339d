#!/usr/bin/env bash
# Requests that fail keep their place in the output: a checkpoint with a NaN embedding row fails
# the requests that read it (finish_reason "error", a message naming the step) while the others
# go on, and `info --check-weights` names the bad values; with --skip-invalid a bad line becomes an
# error record at its place. $1 is the binary.
source "$(dirname "$0")/cli-common.bash"

# 1. A NaN checkpoint made from the tiny Qwen2 fixture, whose head is untied (row 300 of the
# embedding is NaN, row 301 starts with +inf): only prompts holding token 300 or 301 go wrong.
if command -v python3 >/dev/null; then
  python3 scripts/make_nan_checkpoint.py tests/fixtures/models/tiny-qwen2 "$TMP/nan-qwen2" --rows 300
  NAN_MODEL=(--model "$TMP/nan-qwen2" --device cpu)
  printf '%s\n' '{"id":"ok1","prompt_token_ids":[5,6,7]}' '{"id":"bad","prompt_token_ids":[5,300,7]}' \
    '{"id":"ok2","prompt_token_ids":[9,10,11,12]}' >"$TMP/nan.jsonl"
  "$BIN" run "$TMP/nan.jsonl" -o "$TMP/nan.out" "${NAN_MODEL[@]}" --max-tokens 6 --ignore-eos 2>"$TMP/nan.err"
  check "a run with a failed request still exits 0 and writes every line" [ "$(wc -l <"$TMP/nan.out")" -eq 3 ]
  check "the bad request finishes with error naming the step" \
    grep -q '"id":"bad",.*"finish_reason":"error",.*"error":"non-finite logits (NaN or infinity) at engine step 1' "$TMP/nan.out"
  check "the others finish normally with 6 tokens" \
    [ "$(jq -r 'select(.id != "bad") | "\(.finish_reason) \(.token_ids | length)"' "$TMP/nan.out" | sort -u)" == "length 6" ]
  check "the summary counts the failure" grep -q "3 requests (1 failed)" "$TMP/nan.err"
  "$BIN" bench "$TMP/nan.jsonl" --mode offline "${NAN_MODEL[@]}" --max-tokens 6 >"$TMP/bench.out" 2>/dev/null
  check "bench counts it as failed and says why" \
    grep -q "2 completed, 1 failed" "$TMP/bench.out"
  check "  the report names the reason" grep -q "first failure: request 1: non-finite logits" "$TMP/bench.out"

  "$BIN" info "${NAN_MODEL[@]}" --check-weights >"$TMP/check.out" 2>/dev/null
  check "info --check-weights exits 1 on NaN weights" [ $? -eq 1 ]
  check "  and names the first ones" grep -q "^  tok_emb\[300, 0\] = nan" "$TMP/check.out"
  check "  and counts them all (64 NaN + 1 inf)" grep -q "weight check: 65 of .* values are NaN or infinite" "$TMP/check.out"
  "$BIN" info "${COMMON[@]}" --check-weights >"$TMP/clean.out" 2>/dev/null
  check "info --check-weights exits 0 on a clean model" [ $? -eq 0 ]
  check "  saying all finite" grep -q "all finite" "$TMP/clean.out"
else
  echo "skip: python3 not found (needed to make the NaN checkpoint)"
fi

# 2. --skip-invalid: one output line per input line, the bad ones as error records at their place.
printf '%s\n' '{"id":"a","prompt":"hi"}' '{"id":"b","prompt":' '{"id":"c","prompt":"yo","max_tokens":-1}' \
  '{"id":"d","prompt":"hey"}' >"$TMP/mixed.jsonl"
"$BIN" run "$TMP/mixed.jsonl" --skip-invalid --max-tokens 3 "${COMMON[@]}" >"$TMP/mixed.out" 2>/dev/null
check "--skip-invalid exits 0" [ $? -eq 0 ]
check "one output line per input line" [ "$(wc -l <"$TMP/mixed.out")" -eq 4 ]
check "ids in input order, bad lines as line-N" \
  [ "$(jq -r .id "$TMP/mixed.out" | tr '\n' ' ')" == "a line-2 line-3 d " ]
check "bad lines carry the error naming file, line and field" \
  [ "$(jq -r 'select(.finish_reason == "error") | .error' "$TMP/mixed.out" | grep -c "mixed.jsonl:[23]:")" -eq 2 ]
check "the max_tokens error names the field" grep -q "line-3.*field 'max_tokens'" "$TMP/mixed.out"
printf '%s\n' '{"custom_id":"r1","method":"POST","url":"/v1/completions","body":{"prompt":"hi","max_tokens":2}}' \
  'not json' '{"custom_id":"r3","method":"POST","url":"/v1/completions","body":{"prompt":"yo","max_tokens":2}}' \
  >"$TMP/batch.jsonl"
"$BIN" run "$TMP/batch.jsonl" --skip-invalid "${COMMON[@]}" >"$TMP/batch.out" 2>/dev/null
check "batch shape: one line per input line" [ "$(wc -l <"$TMP/batch.out")" -eq 3 ]
check "batch shape: the bad line is response null with an invalid_request error" \
  [ "$(sed -n 2p "$TMP/batch.out" | jq -r '"\(.id) \(.custom_id) \(.response) \(.error.code)"')" == "batch_req_1 null null invalid_request" ]
check "batch shape: batch ids follow the output lines" \
  [ "$(jq -r .id "$TMP/batch.out" | tr '\n' ' ')" == "batch_req_0 batch_req_1 batch_req_2 " ]

finish cli_request_errors
