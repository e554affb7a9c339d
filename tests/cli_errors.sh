#!/usr/bin/env bash
# Every user mistake is a clear message and a nonzero exit: 2 for a bad flag or value, 1 for a bad
# file, line or model. $1 is the binary. Exit 77: not built yet.
source "$(dirname "$0")/cli-common.bash"
# expect EXIT_CODE "STDERR SUBSTRING" ARGS...: runs the binary, checks the exit code and stderr.
expect() {
  local code=$1 needle=$2; shift 2
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ $got -ne "$code" ]; then
    echo "FAIL roseinfer $*: exit $got, expected $code"; sed 's/^/     /' "$TMP/err"; fails=$((fails + 1))
  elif ! grep -qF -- "$needle" "$TMP/err"; then
    echo "FAIL roseinfer $*: stderr lacks '$needle'"; sed 's/^/     /' "$TMP/err"; fails=$((fails + 1))
  else
    echo "ok   roseinfer $* -> $code"
  fi
}

# Files.
expect 1 "roseinfer: error: $TMP/missing.jsonl: no such file" run "$TMP/missing.jsonl" "${COMMON[@]}"
expect 1 "is a directory" run datasets "${COMMON[@]}"
: >"$TMP/empty.jsonl"
expect 1 "empty.jsonl: no requests" run "$TMP/empty.jsonl" "${COMMON[@]}"
printf '{"prompt": "fine"}\n{"prompt": "x", "max_tokens": -3}\n' >"$TMP/bad.jsonl"
expect 1 "bad.jsonl:2: field 'max_tokens': expected a positive integer, got -3" run "$TMP/bad.jsonl" "${COMMON[@]}"
expect 1 "bad.jsonl:2: field 'max_tokens'" bench "$TMP/bad.jsonl" "${COMMON[@]}"
expect 0 "skipped $TMP/bad.jsonl:2: field 'max_tokens'" run "$TMP/bad.jsonl" --skip-invalid "${COMMON[@]}"
printf '{"prompt": "a"}\n{"prompt": "b"} trailing\n' >"$TMP/trail.jsonl"
expect 1 "trail.jsonl:2: invalid JSON: unexpected text after the object" run "$TMP/trail.jsonl" "${COMMON[@]}"
printf '{"prompt": "\xff"}\n' >"$TMP/utf8.jsonl"
expect 1 "utf8.jsonl:1: invalid UTF-8" run "$TMP/utf8.jsonl" "${COMMON[@]}"
printf '{"prompt_token_ids": [1, 99999]}\n' >"$TMP/vocab.jsonl"
expect 1 "vocab.jsonl:1: field 'prompt_token_ids[1]': token id 99999 is outside the vocabulary" run "$TMP/vocab.jsonl" "${COMMON[@]}"
printf '{"prompt_token_ids": [1, 2], "max_tokens": 5000}\n' >"$TMP/long.jsonl"
expect 1 "long.jsonl:1: 2 prompt tokens + max_tokens 5000" run "$TMP/long.jsonl" "${COMMON[@]}"
expect 1 "no/such/dir/out.jsonl: cannot write" run datasets/openai_batch.jsonl -o "$TMP/no/such/dir/out.jsonl" "${COMMON[@]}"
expect 1 "unknown model 'no-such-model'" info --model no-such-model --device cpu
# A tensor-parallel degree the model cannot be split into (tiny has 2 KV heads).
expect 1 "its num_key_value_heads (2) is not a multiple of 4 (it allows --tensor-parallel 1, 2)" run datasets/sample.jsonl --tensor-parallel 4 "${COMMON[@]}"
expect 2 "--tensor-parallel" bench --dataset-name random --tensor-parallel 2 --backend sim "${COMMON[@]}"

# Flags and values (CLI11 validation: exit 2, nothing runs).
expect 2 "--bogus" run datasets/sample.jsonl --bogus
expect 2 "PROMPTS is required" run
expect 2 "--temperature" run datasets/sample.jsonl --temperature -1
expect 2 "--top-p" run datasets/sample.jsonl --top-p 1.5
expect 2 "--max-tokens" run datasets/sample.jsonl --max-tokens 0
expect 2 "--mode" run datasets/sample.jsonl --mode fastest
expect 2 "--quantize" run datasets/sample.jsonl --quantize q4_k_s "${COMMON[@]}"
# Scale-out: an unknown router or a negative load factor, more replicas than GPUs, a sim backend without its model.
expect 2 "--router" bench datasets/sample.jsonl --data-parallel 2 --router random "${COMMON[@]}"
expect 2 "--router-load-factor" bench datasets/sample.jsonl --data-parallel 2 --router prefix \
  --router-load-factor -1 "${COMMON[@]}"
expect 2 "3 replica(s) per process need 3 GPU(s) on this node" bench datasets/sample.jsonl \
  --data-parallel 3 --model tiny --device cuda
expect 2 "GPU 0 does not exist" bench datasets/sample.jsonl --data-parallel 2 --gpus 0,1 \
  --model tiny --device cuda
expect 2 "--gpus" bench datasets/sample.jsonl --data-parallel 2 --gpus 0,1 "${COMMON[@]}"
expect 2 "needs --sim-model" bench datasets/sample.jsonl --backend sim --num-kv-blocks 8 "${COMMON[@]}"
expect 2 "--device" info --device tpu
expect 2 "--dtype" info --dtype int3
expect 2 "--gpu-memory-utilization" run datasets/sample.jsonl --gpu-memory-utilization 0
expect 2 "--request-rate" bench --dataset-name seed000 --request-rate -4
expect 2 "--percentiles" bench --dataset-name seed000 --percentiles 50,101
expect 2 "--slo" bench --dataset-name seed000 --slo ttft=fast
expect 2 "unknown; expected random" bench --dataset-name nope
expect 2 "expected grid:B:PP:TG" bench --dataset-name grid:1:2
expect 2 "give a prompt file or --dataset-name" bench "${COMMON[@]}"
expect 2 "excludes" bench datasets/sample.jsonl --dataset-name seed000
expect 2 "A subcommand is required" 

# Help and version succeed and say what they should.
for sub in run bench info compare; do
  "$BIN" "$sub" --help >"$TMP/help" 2>&1
  if [ $? -eq 0 ] && grep -q "Usage:" "$TMP/help"; then echo "ok   $sub --help"; else echo "FAIL $sub --help"; fails=$((fails + 1)); fi
done
if "$BIN" --version | grep -qE '^roseinfer [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]+'; then
  echo "ok   --version"
else
  echo "FAIL --version"; fails=$((fails + 1))
fi

finish cli_errors
