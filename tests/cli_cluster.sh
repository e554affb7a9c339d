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

# 3. --data-parallel: a 1-replica CPU cluster is the plain engine; 3 replicas split the work and
#    report each replica, the three hit rates and imbalance; precise delivers >= round robin.
PG=(--dataset-name prefix-groups:6:4:x2:16 --random-output-len 4 --num-kv-blocks 16 --block-size 16
    --seed 1 "${COMMON[@]}")
"$BIN" bench "${PG[@]}" --json "$TMP/one.json" >/dev/null 2>&1
"$BIN" bench "${PG[@]}" --data-parallel 1 --router round_robin --json "$TMP/dp1.json" >/dev/null 2>&1
check "--data-parallel 1 bench exits 0" [ $? -eq 0 ]
hits() { grep -o '"prefix_cache_hit_tokens": *[0-9]*' "$1" | head -1; }
check "  same cache hits as no --data-parallel" [ "$(hits "$TMP/one.json")" = "$(hits "$TMP/dp1.json")" ]
for router in round_robin least_loaded prefix precise; do
  "$BIN" bench "${PG[@]}" --data-parallel 3 --router $router --json "$TMP/$router.json" \
    >"$TMP/$router.out" 2>&1
  check "--data-parallel 3 --router $router exits 0" [ $? -eq 0 ]
done
check "table: router line" grep -q "router prefix: hit rate predicted" "$TMP/prefix.out"
check "table: 3 replica rows" [ "$(grep -cE '^  [0-2] +[0-9]+ ' "$TMP/prefix.out")" -eq 3 ]
for key in data_parallel routing_predicted_hit_rate routing_delivered_hit_rate \
  routing_available_hit_rate request_imbalance token_imbalance per_replica; do
  check "JSON has \"$key\"" grep -q "\"$key\":" "$TMP/prefix.json"
done
rate() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['runs'][0]['routing_delivered_hit_rate'])" "$1"; }
check "precise delivers at least round robin's hit rate" \
  python3 -c "import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]))" \
  "$(rate "$TMP/precise.json")" "$(rate "$TMP/round_robin.json")"
"$BIN" compare "$TMP/round_robin.json" "$TMP/prefix.json" --metric routing_delivered_hit_rate:5 \
  --metric request_imbalance:50 >"$TMP/cmp.out" 2>&1
check "compare reads cluster results" grep -q "routing_delivered_hit_rate" "$TMP/cmp.out"

# 4. --backend sim: 8 virtual replicas from a calibrated step-time model, no compute.
SIM=results/2026-11-23-sim-calibration/llama-1b-h100.json
"$BIN" bench --dataset-name prefix-groups:8:4:x2:16 --random-output-len 4 --num-kv-blocks 16 \
  --block-size 16 --model tiny --backend sim --sim-model $SIM --data-parallel 8 --router prefix \
  --json "$TMP/sim.json" >/dev/null 2>&1
check "--backend sim --data-parallel 8 exits 0" [ $? -eq 0 ]
check "  8 replicas reported" grep -q '"data_parallel": *8' "$TMP/sim.json"

# 5. --repeat on a cluster: the router figures are medians like every run key (with a spread), the
#    per-replica rows are one named run's, and compare reads the file.
REP=(--dataset-name prefix-groups:2:2:x1:4 --num-kv-blocks 8 --block-size 16 --random-output-len 2
     --seed 1 --data-parallel 2 --router prefix "${COMMON[@]}")
"$BIN" bench "${REP[@]}" --repeat 2 --json "$TMP/rep2.json" >"$TMP/rep2.out" 2>&1
check "--data-parallel 2 --repeat 2 exits 0" [ $? -eq 0 ]
# The spread names every key, so look in the run itself, not with grep.
for key in data_parallel routing_predicted_hit_rate routing_delivered_hit_rate \
  routing_available_hit_rate request_imbalance token_imbalance representative_repeat; do
  check "repeated run has the number \"$key\"" python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
sys.exit(not isinstance(run.get(sys.argv[2]), (int, float)))' "$TMP/rep2.json" "$key"
done
check "  2 per-replica rows from run 1 or 2, the router, router keys in the spread" python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
ok = (run["repeats"] == 2 and run["router"] == "prefix" and len(run["per_replica"]) == 2
      and run["representative_repeat"] in (1, 2) and run["data_parallel"] == 2
      and sum(r["requests"] for r in run["per_replica"]) == 4
      and "routing_delivered_hit_rate" in run["spread"] and "request_imbalance" in run["spread"])
sys.exit(not ok)' "$TMP/rep2.json"
check "  table: router line and whose replica rows" grep -q "replica rows: run [12] of 2" "$TMP/rep2.out"
check "  spread table has the router figures" grep -qE '^ *routing_delivered_hit_rate ' "$TMP/rep2.out"
"$BIN" bench "${REP[@]}" --json "$TMP/rep1.json" >/dev/null 2>&1
for pair in "rep2 rep2" "rep1 rep2" "rep2 rep1"; do
  set -- $pair
  "$BIN" compare "$TMP/$1.json" "$TMP/$2.json" --metrics-only \
    --metric routing_delivered_hit_rate:5 --metric request_imbalance:50 >"$TMP/cmp.out" 2>&1
  check "compare $1 $2 (repeated cluster results) exits 0" [ $? -eq 0 ]
  check "  and checks the router figures" \
    grep -qE "routing_delivered_hit_rate +[0-9.]+ +[0-9.]+ .* ok$" "$TMP/cmp.out"
done

# 6. --tensor-parallel on the CPU (ranks as threads): the split model's completions are the whole
# model's (the tiny preset's greedy tokens on the sample prompts), alone and under --data-parallel
# 2, and the results record the degree.
"$BIN" run datasets/sample.jsonl -o "$TMP/tp1.jsonl" "${COMMON[@]}" >/dev/null 2>&1
"$BIN" run datasets/sample.jsonl -o "$TMP/tp2.jsonl" --tensor-parallel 2 "${COMMON[@]}" >/dev/null 2>&1
check "run --tensor-parallel 2 exits 0" [ $? -eq 0 ]
check "  with the same tokens as one rank" python3 -c '
import json, sys
ids = [[json.loads(l)["token_ids"] for l in open(f)] for f in sys.argv[1:]]
sys.exit(not (ids[0] == ids[1] and len(ids[0]) > 0))' "$TMP/tp1.jsonl" "$TMP/tp2.jsonl"
# --quantize splits too (the CPU reads the quantized values; a GPU keeps the sliced blocks).
"$BIN" run datasets/sample.jsonl -o "$TMP/tp1q.jsonl" --quantize q8_0 "${COMMON[@]}" >/dev/null 2>&1
"$BIN" run datasets/sample.jsonl -o "$TMP/tp2q.jsonl" --quantize q8_0 --tensor-parallel 2 \
  "${COMMON[@]}" >/dev/null 2>&1
check "run --quantize q8_0 --tensor-parallel 2 exits 0" [ $? -eq 0 ]
check "  with the same tokens as one rank" python3 -c '
import json, sys
ids = [[json.loads(l)["token_ids"] for l in open(f)] for f in sys.argv[1:]]
sys.exit(not (ids[0] == ids[1] and len(ids[0]) > 0))' "$TMP/tp1q.jsonl" "$TMP/tp2q.jsonl"
"$BIN" bench --dataset-name random --num-prompts 8 --random-input-len 24 --random-output-len 4 \
  --tensor-parallel 2 --data-parallel 2 --json "$TMP/tpdp.json" "${COMMON[@]}" >"$TMP/tpdp.out" 2>&1
check "bench --tensor-parallel 2 --data-parallel 2 exits 0" [ $? -eq 0 ]
check "  2 replicas of 2 ranks, the degree in the config" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
run = d["runs"][0]
sys.exit(not (d["config"]["tensor_parallel"] == 2 and len(run["per_replica"]) == 2
              and run["completed"] == 8 and "tensor parallel" in d["device"]))' "$TMP/tpdp.json"

# 7. bench --tensor-parallel 2: a collectives line next to decode bandwidth (the decode step's
# all-reduces and gather timed standalone at its sizes) and its keys in the JSON; none at TP=1.
TPB=(--dataset-name random --num-prompts 4 --random-input-len 16 --random-output-len 6)
"$BIN" bench "${TPB[@]}" --tensor-parallel 2 --json "$TMP/tp2.json" "${COMMON[@]}" \
  >"$TMP/tp2.out" 2>&1
check "bench --tensor-parallel 2 exits 0" [ $? -eq 0 ]
check "  prints the collectives line" grep -qE "^ *collectives +8 all-reduces of [0-9.]+ [KM]?i?B \
\+ 1 all-gather of [0-9.]+ [KM]?i?B per decode step of [0-9]+ rows?: [0-9.]+ ms \([0-9.]+% of the \
step\), [0-9.,]+ GB/s bus \(measured standalone at these sizes\)$" "$TMP/tp2.out"
check "  and writes its keys" python3 -c '
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
keys = ["collective_rows", "all_reduces_per_step", "all_reduce_bytes", "all_reduce_us",
        "all_reduce_bus_gbps", "all_gathers_per_step", "all_gather_bytes", "all_gather_us",
        "collective_ms_per_decode_step", "collective_decode_step_fraction"]
ok = all(k in run for k in keys) and run["all_reduces_per_step"] == 8
ok = ok and run["all_reduce_bytes"] == run["collective_rows"] * 256 * 4 and run["all_reduce_us"] > 0
sys.exit(not ok)' "$TMP/tp2.json"
"$BIN" compare "$TMP/tp2.json" "$TMP/tp2.json" >/dev/null 2>&1
check "  compare of it with itself exits 0" [ $? -eq 0 ]
"$BIN" bench "${TPB[@]}" --json "$TMP/tp1b.json" "${COMMON[@]}" >"$TMP/tp1b.out" 2>&1
check "bench without --tensor-parallel exits 0" [ $? -eq 0 ]
check "  and has no collectives line" bash -c "! grep -q collectives '$TMP/tp1b.out'"
check "  nor its keys" bash -c "! grep -q all_reduce '$TMP/tp1b.json'"

finish cluster
