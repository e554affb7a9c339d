#!/usr/bin/env bash
# End to end: `roseinfer run` on the tiny preset (CPU). $1 is the binary. Exit 77: not built yet.
source "$(dirname "$0")/cli-common.bash"

# 1. -o writes atomically: one line per request, in input order, no temp file left behind.
"$BIN" run datasets/sample.jsonl -o "$TMP/out.jsonl" "${COMMON[@]}" 2>"$TMP/err.txt"
check "run -o exits 0" [ $? -eq 0 ]
want_lines=$(grep -c '[^[:space:]]' datasets/sample.jsonl)
check "one output line per request ($want_lines)" [ "$(wc -l <"$TMP/out.jsonl")" -eq "$want_lines" ]
in_ids=$(grep -o '"id": *"[^"]*"' datasets/sample.jsonl | sed 's/"id": *//')
out_ids=$(grep -o '^{"id":"[^"]*"' "$TMP/out.jsonl" | sed 's/^{"id"://')
check "output ids in input order" [ "$in_ids" == "$out_ids" ]
check "no temporary file left" [ -z "$(ls "$TMP" | grep '\.tmp\.')" ]
for key in prompt_tokens text token_ids finish_reason cached_tokens ttft_ms e2el_ms; do
  check "every line has \"$key\"" [ "$(grep -c "\"$key\":" "$TMP/out.jsonl")" -eq "$want_lines" ]
done
# The token-ids line asks for 16 tokens with ignore_eos: exactly 16 come back.
ids_line=$(grep '"id":"token-ids"' "$TMP/out.jsonl")
n_ids=$(echo "$ids_line" | sed 's/.*"token_ids":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | grep -c .)
check "ignore_eos request has exactly max_tokens ids" [ "$n_ids" -eq 16 ]
check "prompt_tokens of the ids line is 12" grep -q '"id":"token-ids","prompt_tokens":12,' "$TMP/out.jsonl"
check "stderr says the weights are synthetic" grep -q "synthetic weights" "$TMP/err.txt"
check "stderr summary names the device" grep -q "device cpu" "$TMP/err.txt"

# 2. stdout gives the same completions; so does the prefix cache off (greedy and seeded sampling
# do not depend on caching). Timings differ run to run, so they are cut out before comparing.
strip_times() { sed -E 's/"(ttft_ms|e2el_ms|cached_tokens)":[^,}]*//g' "$1"; }
"$BIN" run datasets/sample.jsonl "${COMMON[@]}" >"$TMP/stdout.jsonl" 2>/dev/null
check "stdout equals the -o file" diff <(strip_times "$TMP/out.jsonl") <(strip_times "$TMP/stdout.jsonl")
"$BIN" run datasets/sample.jsonl --no-prefix-cache --mode naive "${COMMON[@]}" >"$TMP/nocache.jsonl" 2>/dev/null
check "naive without prefix cache gives the same tokens" diff <(strip_times "$TMP/out.jsonl") <(strip_times "$TMP/nocache.jsonl")

# 3. Overwriting keeps working and replaces the old content.
echo "old" >"$TMP/over.jsonl"
"$BIN" run datasets/sample.jsonl -o "$TMP/over.jsonl" "${COMMON[@]}" 2>/dev/null
check "-o replaces an existing file" [ "$(wc -l <"$TMP/over.jsonl")" -eq "$want_lines" ]

# 4. OpenAI batch input gives the batch output shape.
"$BIN" run datasets/openai_batch.jsonl -o "$TMP/batch.jsonl" "${COMMON[@]}" 2>/dev/null
check "batch run exits 0" [ $? -eq 0 ]
check "batch output keeps custom_id order" [ "$(grep -o '"custom_id":"[^"]*"' "$TMP/batch.jsonl" | tr '\n' ' ')" == '"custom_id":"request-1" "custom_id":"request-2" "custom_id":"request-3" ' ]
check "batch output has status 200 and error null" [ "$(grep -c '"status_code":200,.*"error":null}$' "$TMP/batch.jsonl")" -eq 3 ]
check "chat lines are chat.completion" [ "$(grep -c '"object":"chat.completion"' "$TMP/batch.jsonl")" -eq 2 ]

# 5. Flags fill what lines leave out; per-line fields win.
printf '{"id":"a","prompt":"hi"}\n{"id":"b","prompt":"hi","max_tokens":2}\n' >"$TMP/two.jsonl"
"$BIN" run "$TMP/two.jsonl" --max-tokens 5 --ignore-eos "${COMMON[@]}" >"$TMP/two.out" 2>/dev/null
count_ids() { grep "\"id\":\"$1\"" "$TMP/two.out" | sed 's/.*"token_ids":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | grep -c .; }
check "--max-tokens applies to lines without max_tokens" [ "$(count_ids a)" -eq 5 ]
check "a line's max_tokens overrides --max-tokens" [ "$(count_ids b)" -eq 2 ]

# 6. --quantize q4_k_m: info names the mix (tiny: layers 2 and 3 get Q6_K v rows, the tied lm_head
# Q6_K, the down projections stay dense), and the CPU runs on its dequantized values.
"$BIN" info --quantize q4_k_m "${COMMON[@]}" >"$TMP/info_q4km.txt" 2>/dev/null
check "info --quantize q4_k_m lists the mix" grep -q "Q4_K x 12, Q6_K x 3, dense x 4" "$TMP/info_q4km.txt"
"$BIN" run "$TMP/two.jsonl" --quantize q4_k_m "${COMMON[@]}" >"$TMP/q4km.out" 2>/dev/null
check "run --quantize q4_k_m exits 0" [ $? -eq 0 ]
check "run --quantize q4_k_m answers both lines" [ "$(wc -l <"$TMP/q4km.out")" -eq 2 ]

finish cli_run
