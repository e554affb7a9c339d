#!/usr/bin/env bash
# End to end for scale-out: the routing workloads through bench, and `calibrate` fitting the sim
# backend's step-time model to measured runs. $1 is the binary. Exit 77: not built yet.
source "$(dirname "$0")/cli-common.bash"

# 1. The routing workloads run through bench and say how many tokens they have.
"$BIN" bench --dataset-name prefix-groups:3:2:32:8 --random-output-len 3 --json "$TMP/pg.json" \
  "${COMMON[@]}" >/dev/null 2>&1
check "prefix-groups bench exits 0" [ $? -eq 0 ]
check "prefix-groups: 6 x 40 input tokens" grep -q '"total_input_tokens": *240' "$TMP/pg.json"
check "prefix-groups: shared prefixes hit the cache" \
  grep -q '"prefix_cache_hit_tokens": *[1-9]' "$TMP/pg.json"
"$BIN" bench --dataset-name chat:2:3:8:4:0.01 --mode online --json "$TMP/chat.json" \
  "${COMMON[@]}" >/dev/null 2>&1
check "chat bench exits 0" [ $? -eq 0 ]
check "chat: 6 turns of 8, 20, 32 tokens" grep -q '"total_input_tokens": *120' "$TMP/chat.json"
"$BIN" bench --dataset-name prefix-groups:2:2:x1 "${COMMON[@]}" >/dev/null 2>"$TMP/x.err"
check "xK without --num-kv-blocks is an error" [ $? -ne 0 ]
check "  naming what it needs" grep -q "needs one replica's KV capacity" "$TMP/x.err"
"$BIN" bench --dataset-name prefix-groups:2:2:x1:4 --num-kv-blocks 8 --block-size 16 \
  --random-output-len 2 --json "$TMP/x.json" "${COMMON[@]}" >/dev/null 2>&1
check "xK with --num-kv-blocks 8 x 16: 2 prefixes of 64, 4 prompts of 68" \
  grep -q '"total_input_tokens": *272' "$TMP/x.json"

# 2. calibrate: a model from measured runs, errors per run, a held-out check, bad input refused.
H100=results/2026-11-21-h100
"$BIN" calibrate $H100/grid_llama-1b_b1.json $H100/grid_llama-1b_b16.json \
  $H100/grid_llama-1b_b64.json $H100/grid_llama-1b_b256.json --held-out $H100/nano256.json \
  -o "$TMP/sim.json" >"$TMP/cal.out" 2>&1
check "calibrate exits 0" [ $? -eq 0 ]
for key in base_s per_prefill_token_s per_decode_seq_s per_kv_token_read_s source; do
  check "model has \"$key\"" grep -q "\"$key\":" "$TMP/sim.json"
done
check "errors per fitted run" [ "$(grep -c 'error' "$TMP/cal.out")" -ge 5 ]
check "a held-out section" grep -q "held-out runs:" "$TMP/cal.out"
"$BIN" calibrate datasets/sample.jsonl -o "$TMP/bad.json" >/dev/null 2>&1
check "calibrate on a non-results file exits 1" [ $? -eq 1 ]
check "  and writes nothing" [ ! -e "$TMP/bad.json" ]

finish cluster
