#!/usr/bin/env bash
# `run -o OUT` keeps every finished request in OUT.partial: a run killed with -9 at random points
# and continued with --resume gives the same ids, token ids and text as an uninterrupted run;
# SIGINT leaves a journal whose every line parses and says how to resume; a torn last line is
# computed again; a journal of another input is refused (exit 2); stop strings survive kill and
# resume. $1 is the binary.
source "$(dirname "$0")/cli-common.bash"

# 96 requests of 48 tokens (ignore_eos), at most 8 at a time, so the run takes many steps; every
# third line samples (its seed is --seed + its index), the others are greedy.
for i in $(seq 0 95); do
  extra=''
  [ $((i % 3)) -eq 0 ] && extra=',"temperature":0.8,"top_k":40'
  printf '{"id":"r%d","prompt":"request %d: the quick brown fox %d"%s}\n' "$i" "$i" $((i * 7)) "$extra"
done >"$TMP/in.jsonl"
ARGS=(--max-tokens 48 --ignore-eos --max-num-seqs 8 --seed 5 "${COMMON[@]}")
# What must not change: ids, token ids, text, finish reasons, in input order (times and cache
# hits depend on what ran together).
strip() { sed -E 's/"(ttft_ms|e2el_ms|cached_tokens)":[^,}]*,?//g' "$1"; }
ms_now() { date +%s%3N; }

start=$(ms_now)
"$BIN" run "$TMP/in.jsonl" -o "$TMP/ref.jsonl" "${ARGS[@]}" 2>/dev/null
check "uninterrupted run exits 0" [ $? -eq 0 ]
duration_ms=$(($(ms_now) - start))
check "no journal is left after a whole run" [ ! -e "$TMP/ref.jsonl.partial" ]
check "96 output lines" [ "$(wc -l <"$TMP/ref.jsonl")" -eq 96 ]

# 1. kill -9 at random points (the resumed run is killed too on odd seeds), then --resume until
# it finishes.
for seed in 1 2 3 4 5; do
  RANDOM=$seed
  out="$TMP/kill$seed.jsonl"
  kills=0
  for attempt in 1 2; do
    [ $attempt -eq 2 ] && [ $((seed % 2)) -eq 0 ] && break
    resume=()
    [ $attempt -eq 2 ] && resume=(--resume)
    "$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" "${resume[@]}" 2>/dev/null &
    pid=$!
    sleep "$(awk -v r=$RANDOM -v d="$duration_ms" 'BEGIN { printf "%.3f", (0.15 + 0.7 * r / 32767) * d / 1000 }')"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
  done
  [ -e "$out.partial" ] && saved=$(($(wc -l <"$out.partial") - 1)) || saved=none
  "$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" --resume 2>"$TMP/resume$seed.err"
  check "seed $seed: resume after $kills kill(s) ($saved journaled) exits 0" [ $? -eq 0 ]
  check "seed $seed: resumed output equals the uninterrupted one" diff <(strip "$TMP/ref.jsonl") <(strip "$out")
  check "seed $seed: journal removed" [ ! -e "$out.partial" ]
done

# 2. SIGINT: exit 130, the journal keeps the finished requests, every line parses, the message
# says how many and how to resume; no output file, no temporary file.
out="$TMP/int.jsonl"
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" 2>"$TMP/int.err" &
pid=$!
sleep "$(awk -v d="$duration_ms" 'BEGIN { printf "%.3f", 0.5 * d / 1000 }')"
kill -INT "$pid"
wait "$pid"
check "SIGINT exits 130" [ $? -eq 130 ]
check "the journal exists" [ -s "$out.partial" ]
check "every journal line parses" jq -e . "$out.partial" >/dev/null
check "the header has a fingerprint" bash -c "head -1 '$out.partial' | jq -e '.roseinfer_journal == 1 and (.fingerprint | length) == 32' >/dev/null"
check "entries have index and id" bash -c "tail -n +2 '$out.partial' | jq -e 'has(\"index\") and has(\"id\") and has(\"token_ids\")' | grep -qv false"
saved=$(($(wc -l <"$out.partial") - 1))
check "the message says how many ($saved) and how to resume" grep -q "interrupted: $saved of 96 requests .*--resume" "$TMP/int.err"
check "no output file and no temporary file" [ -z "$(ls "$TMP" | grep -E '^int\.jsonl($|\.tmp)')" ]

# 3. Without --resume an existing journal is not overwritten; a changed input is refused.
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" 2>"$TMP/exists.err"
check "a journal without --resume: exit 2" [ $? -eq 2 ]
check "  naming --resume" grep -q "add --resume" "$TMP/exists.err"
sed 's/fox 7"/fox 8"/' "$TMP/in.jsonl" >"$TMP/changed.jsonl"
cp "$out.partial" "$TMP/changed.jsonl.partial"
"$BIN" run "$TMP/changed.jsonl" -o "$TMP/changed.jsonl" "${ARGS[@]}" --resume 2>"$TMP/changed.err"
check "--resume with a changed input file: exit 2" [ $? -eq 2 ]
check "  saying why" grep -q "another input file, model or sampling" "$TMP/changed.err"
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" --temperature 0.5 --resume 2>/dev/null
check "--resume with other sampling defaults: exit 2" [ $? -eq 2 ]
"$BIN" run "$TMP/in.jsonl" "${ARGS[@]}" --resume >/dev/null 2>&1
check "--resume without -o: exit 2" [ $? -eq 2 ]

# 4. A torn last line (power loss) is ignored and its request computed again.
size=$(stat -c %s "$out.partial")
truncate -s $((size - 10)) "$out.partial"
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" --resume 2>"$TMP/torn.err"
check "resume after a torn line exits 0" [ $? -eq 0 ]
check "  and says the line was dropped" grep -q "torn last line" "$TMP/torn.err"
check "  output equals the uninterrupted one" diff <(strip "$TMP/ref.jsonl") <(strip "$out")

# 5. Stop strings and --resume together: every other line has per-request stop strings, so
# requests end at different lengths; runs killed with -9 (and resumed runs killed too), then
# resumed, give the uninterrupted run's ids, token ids, text and finish reasons.
for i in $(seq 0 95); do
  extra=''
  [ $((i % 3)) -eq 0 ] && extra=',"temperature":0.8,"top_k":40'
  [ $((i % 2)) -eq 0 ] && extra="$extra"',"stop":["!Q","Q!","OB"]'
  printf '{"id":"s%d","prompt":"request %d: the quick brown fox %d"%s}\n' "$i" "$i" $((i * 7)) "$extra"
done >"$TMP/stop.jsonl"
start=$(ms_now)
"$BIN" run "$TMP/stop.jsonl" -o "$TMP/stopref.jsonl" "${ARGS[@]}" 2>/dev/null
check "stop strings: uninterrupted run exits 0" [ $? -eq 0 ]
stop_ms=$(($(ms_now) - start))
stops=$(grep -c '"finish_reason":"stop"' "$TMP/stopref.jsonl")
check "stop strings: some requests ($stops) end on a stop string" [ "$stops" -ge 3 ]
for seed in 6 7 8; do
  RANDOM=$seed
  out="$TMP/stopkill$seed.jsonl"
  for attempt in 1 2; do
    resume=()
    [ $attempt -eq 2 ] && resume=(--resume)
    "$BIN" run "$TMP/stop.jsonl" -o "$out" "${ARGS[@]}" "${resume[@]}" 2>/dev/null &
    pid=$!
    sleep "$(awk -v r=$RANDOM -v d="$stop_ms" 'BEGIN { printf "%.3f", (0.15 + 0.6 * r / 32767) * d / 1000 }')"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  "$BIN" run "$TMP/stop.jsonl" -o "$out" "${ARGS[@]}" --resume 2>/dev/null
  check "stop strings, seed $seed: resume after kill -9 exits 0" [ $? -eq 0 ]
  check "stop strings, seed $seed: output equals the uninterrupted one" diff <(strip "$TMP/stopref.jsonl") <(strip "$out")
done

finish cli_journal
