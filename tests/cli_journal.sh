#!/usr/bin/env bash
# `run -o OUT` keeps every finished request in OUT.partial. A run stopped at any point a kill -9
# can leave it (after N journaled requests, with a torn last line, with the output committed but
# the journal not yet removed, or by a real kill -9 from outside) and continued with --resume,
# itself killed or not, gives the same ids, token ids, text and finish reasons as an uninterrupted
# run; SIGINT leaves a journal whose every line parses and says how to resume; a torn last line is
# computed again; a journal of another input is refused (exit 2); stop strings survive kill and
# resume. $1 is the binary.
#
# The stops come from ROSEINFER_TEST_INTERRUPT (cli/cmd_run.cpp), which kills the run at a point of
# its progress, not at a wall-clock moment: a sleep-then-kill lands anywhere on a loaded machine
# (even after the run has ended, which made the SIGINT part and everything after it fail), and it
# needed a workload long enough to aim at, which took 25 minutes under ASan.
source "$(dirname "$0")/cli-common.bash"

# 20 requests of 8 tokens (ignore_eos), at most 4 at a time and 8 read ahead (--window), so the
# run takes several waves and streams its input; two lines in three sample (seed: --seed + the
# line's index), the others are greedy; the prompts share their first two KV blocks (--block-size
# 4), so prefix-cache hits depend on what ran before. $1: id prefix; $2: a JSON field added to
# even lines (or nothing).
N=20
make_input() {
  local i extra
  for i in $(seq 0 $((N - 1))); do
    extra=''
    [ $((i % 3)) -ne 1 ] && extra=',"temperature":0.8,"top_k":40'
    [ $((i % 2)) -eq 0 ] && [ -n "${2:-}" ] && extra="$extra,$2"
    printf '{"id":"%s%d","prompt":"the fox %d"%s}\n' "$1" "$i" $((i * 37 + 11)) "$extra"
  done
}
make_input r >"$TMP/in.jsonl"
ARGS=(--max-tokens 8 --ignore-eos --max-num-seqs 4 --window 8 --block-size 4 --seed 5 "${COMMON[@]}")
# What must not change: ids, token ids, text, finish reasons, in input order (times and cache
# hits depend on what ran together).
strip() { sed -E 's/"(ttft_ms|e2el_ms|cached_tokens)":[^,}]*,?//g' "$1"; }
entries() { echo $(($(wc -l <"$1") - 1)); }  # whole entry lines of a journal (after the header)
holds() { [ "$(entries "$1")" -eq "$2" ] && [ -z "$(tail -c 1 "$1")" ]; }  # JOURNAL N: N, whole
holds_torn() { [ "$(entries "$1")" -eq "$2" ] && [ -n "$(tail -c 1 "$1")" ]; }  # N and a torn line

"$BIN" run "$TMP/in.jsonl" -o "$TMP/ref.jsonl" "${ARGS[@]}" 2>/dev/null
check "uninterrupted run exits 0" [ $? -eq 0 ]
check "no journal is left after a whole run" [ ! -e "$TMP/ref.jsonl.partial" ]
check "$N output lines" [ "$(wc -l <"$TMP/ref.jsonl")" -eq $N ]
check "the output differs between requests (sampled lines)" \
  [ "$(strip "$TMP/ref.jsonl" | sed -E 's/"id":"[^"]*",//' | sort -u | wc -l)" -ge $((N / 2)) ]

# killed INPUT OUT POINT [--resume]: one run stopped by ROSEINFER_TEST_INTERRUPT=POINT; true when
# it died of SIGKILL (exit 137), as the point promises.
killed() {
  local input=$1 out=$2 point=$3
  shift 3
  # In a subshell, whose stderr also takes the shell's "Killed" notice.
  (ROSEINFER_TEST_INTERRUPT=$point "$BIN" run "$input" -o "$out" "${ARGS[@]}" "$@"; exit $?) 2>/dev/null
  [ $? -eq 137 ]
}
# resumed NAME INPUT OUT REF: the last --resume finishes, gives REF's output, removes the journal.
resumed() {
  local name=$1 input=$2 out=$3 ref=$4
  "$BIN" run "$input" -o "$out" "${ARGS[@]}" --resume 2>"$TMP/resume.err"
  check "$name: resume exits 0" [ $? -eq 0 ]
  check "$name: output equals the uninterrupted one" diff <(strip "$ref") <(strip "$out")
  check "$name: journal removed" [ ! -e "$out.partial" ]
}

# 1. kill -9 at every kind of point, then --resume until it finishes.
out="$TMP/k0.jsonl"
check "killed as soon as the journal is opened" killed "$TMP/in.jsonl" "$out" 0:kill
check "  the journal holds only its header" holds "$out.partial" 0
resumed "killed before any request finished" "$TMP/in.jsonl" "$out" "$TMP/ref.jsonl"

out="$TMP/k1.jsonl"
check "killed after 7 requests" killed "$TMP/in.jsonl" "$out" 7:kill
check "  7 journaled" holds "$out.partial" 7
check "the resumed run killed in its 5th line" killed "$TMP/in.jsonl" "$out" 5:torn --resume
check "  11 journaled and a torn line" holds_torn "$out.partial" 11
resumed "killed twice, the second time in a line" "$TMP/in.jsonl" "$out" "$TMP/ref.jsonl"
check "  the torn line was dropped and computed again" grep -q "torn last line" "$TMP/resume.err"
check "  11 requests were not computed again" grep -q -- "--resume: 11 of $N requests already finished" "$TMP/resume.err"

out="$TMP/k2.jsonl"
check "killed while writing the first line" killed "$TMP/in.jsonl" "$out" 1:torn
check "  a torn line only" holds_torn "$out.partial" 0
resumed "killed in the first line" "$TMP/in.jsonl" "$out" "$TMP/ref.jsonl"

out="$TMP/k3.jsonl"
check "killed after all but the last request" killed "$TMP/in.jsonl" "$out" $((N - 1)):kill
resumed "killed before the last request" "$TMP/in.jsonl" "$out" "$TMP/ref.jsonl"

out="$TMP/k4.jsonl"
check "killed between committing the output and removing the journal" \
  killed "$TMP/in.jsonl" "$out" commit:kill
check "  the output is there" [ -s "$out" ]
check "  and the whole journal" holds "$out.partial" $N
resumed "killed after the commit" "$TMP/in.jsonl" "$out" "$TMP/ref.jsonl"

# A real kill -9 from outside, once the journal exists: wherever it lands (in a step, in a write,
# after the end), resuming gives the same output.
out="$TMP/k5.jsonl"
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" 2>/dev/null &
pid=$!
for _ in $(seq 400); do [ -e "$out.partial" ] || [ -e "$out" ] && break; sleep 0.05; done
kill -9 "$pid" 2>/dev/null && how="killed" || how="had finished"
wait "$pid" 2>/dev/null
[ -e "$out.partial" ] && how="$how, $(entries "$out.partial") journaled"
resumed "kill -9 from outside ($how)" "$TMP/in.jsonl" "$out" "$TMP/ref.jsonl"

# 2. SIGINT (raised after 8 journaled requests): exit 130, the journal keeps the finished
# requests, every line parses, the message says how many and how to resume; no output file, no
# temporary file.
out="$TMP/int.jsonl"
ROSEINFER_TEST_INTERRUPT=8:int "$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" 2>"$TMP/int.err"
check "SIGINT exits 130" [ $? -eq 130 ]
check "the journal exists" [ -s "$out.partial" ]
check "every journal line parses" jq -e . "$out.partial" >/dev/null
check "the header has a fingerprint" bash -c "head -1 '$out.partial' | jq -e '.roseinfer_journal == 1 and (.fingerprint | length) == 32' >/dev/null"
check "entries have index and id" bash -c "tail -n +2 '$out.partial' | jq -e 'has(\"index\") and has(\"id\") and has(\"token_ids\")' | grep -qv false"
saved=$(entries "$out.partial")
check "the journal's lines are whole" holds "$out.partial" "$saved"
check "at least the 8 finished requests, not all $N, are kept ($saved)" [ "$saved" -ge 8 -a "$saved" -lt $N ]
check "the message says how many ($saved) and how to resume" grep -q "interrupted: $saved of $N requests .*--resume" "$TMP/int.err"
check "no output file and no temporary file" [ -z "$(ls "$TMP" | grep -E '^int\.jsonl($|\.tmp)')" ]

# 3. Without --resume an existing journal is not overwritten; a changed input is refused.
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" 2>"$TMP/exists.err"
check "a journal without --resume: exit 2" [ $? -eq 2 ]
check "  naming --resume" grep -q "add --resume" "$TMP/exists.err"
sed 's/fox 48"/fox 49"/' "$TMP/in.jsonl" >"$TMP/changed.jsonl"
check "  (the changed input differs)" bash -c "! cmp -s '$TMP/in.jsonl' '$TMP/changed.jsonl'"
cp "$out.partial" "$TMP/changed.jsonl.partial"
"$BIN" run "$TMP/changed.jsonl" -o "$TMP/changed.jsonl" "${ARGS[@]}" --resume 2>"$TMP/changed.err"
check "--resume with a changed input file: exit 2" [ $? -eq 2 ]
check "  saying why" grep -q "another input file, model or sampling" "$TMP/changed.err"
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" --temperature 0.5 --resume 2>/dev/null
check "--resume with other sampling defaults: exit 2" [ $? -eq 2 ]
"$BIN" run "$TMP/in.jsonl" "${ARGS[@]}" --resume >/dev/null 2>&1
check "--resume without -o: exit 2" [ $? -eq 2 ]
check "the refused runs left the journal as it was" [ "$(entries "$out.partial")" -eq "$saved" ]

# 4. A torn last line (power loss) is ignored and its request computed again.
size=$(stat -c %s "$out.partial")
truncate -s $((size - 10)) "$out.partial"
"$BIN" run "$TMP/in.jsonl" -o "$out" "${ARGS[@]}" --resume 2>"$TMP/torn.err"
check "resume after a torn line exits 0" [ $? -eq 0 ]
check "  and says the line was dropped" grep -q "torn last line" "$TMP/torn.err"
check "  output equals the uninterrupted one" diff <(strip "$TMP/ref.jsonl") <(strip "$out")

# 5. Stop strings and --resume together: every other line has per-request stop strings, so
# requests end at different lengths; runs killed (and resumed runs killed too), then resumed, give
# the uninterrupted run's ids, token ids, text and finish reasons.
make_input s '"stop":["!","O","Q"]' >"$TMP/stop.jsonl"
"$BIN" run "$TMP/stop.jsonl" -o "$TMP/stopref.jsonl" "${ARGS[@]}" 2>/dev/null
check "stop strings: uninterrupted run exits 0" [ $? -eq 0 ]
stops=$(grep -c '"finish_reason":"stop"' "$TMP/stopref.jsonl")
check "stop strings: some requests ($stops) end on a stop string" [ "$stops" -ge 3 ]
out="$TMP/stopkill1.jsonl"
check "stop strings: killed after 5 requests" killed "$TMP/stop.jsonl" "$out" 5:kill
check "stop strings: the resumed run killed after 6 more" killed "$TMP/stop.jsonl" "$out" 6:kill --resume
resumed "stop strings, killed twice" "$TMP/stop.jsonl" "$out" "$TMP/stopref.jsonl"
out="$TMP/stopkill2.jsonl"
check "stop strings: killed in the 3rd line" killed "$TMP/stop.jsonl" "$out" 3:torn
resumed "stop strings, killed in a line" "$TMP/stop.jsonl" "$out" "$TMP/stopref.jsonl"

finish cli_journal
