#!/usr/bin/env bash
# roseinfer tokenize: the rendered prompt and ids of each line, on the preset (always) and on the
# real SmolLM2 GGUF where it is cached (its ids compared with transformers' reference vector).
source "$(dirname "$0")/cli-common.bash"

"$BIN" tokenize datasets/sample.jsonl --model tiny >"$TMP/tok.jsonl" 2>"$TMP/err.txt"
check "tokenize exits 0" test $? = 0
want=$(grep -c '[^[:space:]]' datasets/sample.jsonl)
check "one line per request" test "$(wc -l <"$TMP/tok.jsonl")" = "$want"
# The preset's built-in template: "role: content" lines then "assistant:".
check "chat lines are rendered" grep -q '"id":"capital","prompt":"user: What is the capital of France?\\nassistant:"' "$TMP/tok.jsonl"
# Byte tokenizer: ids are the bytes of the rendered prompt ("user" = 117,115,101,114).
check "ids follow the prompt" grep -q '"id":"capital",.*"token_ids":\[117,115,101,114,' "$TMP/tok.jsonl"

printf '{"id":"x","messages":[{"role":"user","content":"hi"}]}\n' >"$TMP/chat.jsonl"
printf '{{ raise_exception("no chats here") }}' >"$TMP/raise.jinja"
"$BIN" tokenize "$TMP/chat.jsonl" --model tiny --chat-template "$TMP/raise.jinja" >/dev/null 2>"$TMP/err2.txt"
check "a raising template exits 1" test $? = 1
check "the template's message names the line" grep -q "chat.jsonl:1: field 'messages'.*no chats here" "$TMP/err2.txt"

# run --skip-invalid: a line whose template raises fails alone, its error record in its place.
printf '{{ raise_exception("no system role") if messages[0].role == "system" else "" }}{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$TMP/nosys.jinja"
printf '%s\n' '{"id":"a","messages":[{"role":"user","content":"hi"}],"max_tokens":2}' \
  '{"id":"b","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":2}' \
  '{"id":"c","prompt":"x","max_tokens":2}' >"$TMP/mixed.jsonl"
"$BIN" run "$TMP/mixed.jsonl" --chat-template "$TMP/nosys.jinja" --skip-invalid "${COMMON[@]}" >"$TMP/mixed.out" 2>/dev/null
check "run --skip-invalid with a raising template exits 0" test $? = 0
check "three output lines" test "$(wc -l <"$TMP/mixed.out")" = 3
check "the raising line is an error record with the template's message" grep -q 'no system role' <(sed -n 2p "$TMP/mixed.out")
check "the others completed" grep -q '"id":"c"' <(sed -n 3p "$TMP/mixed.out")
"$BIN" run "$TMP/mixed.jsonl" --chat-template "$TMP/nosys.jinja" "${COMMON[@]}" >/dev/null 2>"$TMP/mixed.err"
check "without --skip-invalid the run fails naming the line" grep -q "mixed.jsonl:2: field 'messages'.*no system role" "$TMP/mixed.err"

model=${ROSEINFER_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/roseinfer}/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ -f "$model" ]]; then
  printf '{"id":"h","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}]}\n' >"$TMP/hello.jsonl"
  "$BIN" tokenize "$TMP/hello.jsonl" --model "$model" >"$TMP/hello.out" 2>/dev/null
  # transformers' apply_chat_template ids on the same GGUF (reference/gguf-and-chat-templates.md).
  check "SmolLM2 chat ids equal transformers'" grep -q '"token_ids":\[1,9690,198,2683,359,253,5356,11173,30,2,198,1,4093,198,19556,17,2,198,1,520,9531,198\]' "$TMP/hello.out"
fi
finish tokenize
