#!/usr/bin/env bash
# Router policy x workload study on this machine's CPU (tiny preset, 3 replicas) and on the sim
# backend (16 and 64 replicas): writes each bench JSON and a markdown table into OUT.
# Usage: [REPEATS=K] scripts/cluster_study.sh BIN OUT
# REPEATS (default 1) runs every cell K times, the routers of a cell in turn within each round so
# that a busy spell of a shared machine falls on all of them; files WORKLOAD__ROUTER.json, then
# WORKLOAD__ROUTER.r2.json ...; the table gives each number's median over the rounds (CPU timings
# move from run to run; offline and sim runs route identically every time).
set -eu
BIN=$1
OUT=$2
mkdir -p "$OUT"
COMMIT=$(git rev-parse --short=12 HEAD)
POLICIES="round_robin least_loaded prefix precise"
REPEATS=${REPEATS:-1}
SIM_MODEL=results/2026-11-23-sim-calibration/llama-1b-h100.json

run() {  # run NAME ARGS...: one bench per policy, REPEATS rounds
  local name=$1; shift
  for ((k = 1; k <= REPEATS; k++)); do
    local suffix=""
    [ "$k" -gt 1 ] && suffix=".r$k"
    for policy in $POLICIES; do
      "$BIN" bench "$@" --router "$policy" --json "$OUT/${name}__$policy$suffix.json" \
        >"$OUT/${name}__$policy$suffix.txt" 2>&1
    done
  done
}

CPU=(--model tiny --device cpu --data-parallel 3 --num-kv-blocks 32 --block-size 16 --seed 1)
run cpu-prefix-groups --dataset-name prefix-groups:12:6:x3:32 --random-output-len 8 "${CPU[@]}"
run cpu-no-sharing --dataset-name random --num-prompts 72 --random-input-len 160 \
  --random-output-len 8 "${CPU[@]}"
run cpu-chat --dataset-name chat:12:4:32:8:0.5 --mode online "${CPU[@]}"
# Where placement matters (reference/routing.md W2/W4): Poisson arrivals, Zipf(0.8) group
# popularity, prefixes totalling 2x one replica's KV (so round robin makes every replica cycle
# through all of them) but 2/3 of the cluster's.
run cpu-pg-online --dataset-name prefix-groups:6:12:x2:32:0.8 --random-output-len 8 \
  --mode online --request-rate 2 "${CPU[@]}"
SIM3=(--model tiny --backend sim --sim-model "$SIM_MODEL" --data-parallel 3 --num-kv-blocks 256
      --block-size 16 --seed 1)
run sim3-pg-online --dataset-name prefix-groups:24:16:x2:64:0.8 --random-output-len 32 \
  --mode online --request-rate 60 "${SIM3[@]}"
# The same at 600 req/s, where round robin's replicas saturate (60 req/s leaves them idle between
# arrivals, so a hit saves only the prefill part of a short TTFT).
run sim3-pg-online-600 --dataset-name prefix-groups:24:16:x2:64:0.8 --random-output-len 32 \
  --mode online --request-rate 600 "${SIM3[@]}"

for n in 16 64; do
  SIM=(--model tiny --backend sim --sim-model "$SIM_MODEL" --data-parallel "$n" --num-kv-blocks 256
       --block-size 16 --seed 1)
  run "sim$n-prefix-groups" --dataset-name "prefix-groups:$((n * 4)):16:x4:64" \
    --random-output-len 32 "${SIM[@]}"
  run "sim$n-no-sharing" --dataset-name random --num-prompts $((n * 64)) --random-input-len 320 \
    --random-output-len 32 "${SIM[@]}"
done

python3 - "$OUT" "$COMMIT" <<'PY'
import json, sys, glob, os, statistics
out, commit = sys.argv[1], sys.argv[2]
runs = {}
for path in sorted(glob.glob(f"{out}/*.json")):
    name = os.path.basename(path)[:-5].split(".r")[0]
    workload, policy = name.split("__")
    runs.setdefault((workload, policy), []).append(json.load(open(path))["runs"][0])
rounds = max(len(v) for v in runs.values())
rows = []
for (workload, policy), rs in sorted(runs.items()):
    rows.append((workload, policy, {k: statistics.median(r[k] for r in rs) for k in rs[0]
                                    if isinstance(rs[0][k], (int, float))}))
lines = [
    f"commit {commit}; devices: "
    + ", ".join(sorted({json.load(open(p))["device"] for p in glob.glob(f"{out}/*.json")}))
    + (f"; medians of {rounds} rounds" if rounds > 1 else ""),
    "",
    "| workload | router | hit predicted | hit delivered | hit available | TTFT p50 (ms) | TTFT p99 (ms) | output tok/s | imbalance req / tok |",
    "|---|---|---|---|---|---|---|---|---|",
]
for workload, policy, r in rows:
    lines.append(
        f"| {workload} | {policy} | {r['routing_predicted_hit_rate']:.1%} | "
        f"{r['routing_delivered_hit_rate']:.1%} | {r['routing_available_hit_rate']:.1%} | "
        f"{r['median_ttft_ms']:.1f} | {r['p99_ttft_ms']:.1f} | {r['output_throughput']:.0f} | "
        f"{r['request_imbalance']:.2f} / {r['token_imbalance']:.2f} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
