#!/usr/bin/env bash
# Issue 16's data-parallel scaling points, predicted by the sim backend while no 4- or 8-GPU
# machine is lent: nano256 (offline) and the 2-GPU study's prefix groups (offline and online at
# 64 req/s) at 1, 2, 4 and 8 replicas under every router, with the step-time model calibrated on
# the H100 (llama-1b). Each replica gets the H100's llama-1b KV pool for nano256 (136,816 blocks
# of 16, what `bench` sized there) and 2,048 blocks for the prefix groups (as the 2-GPU study).
# Usage: scripts/scaling_sim.sh BIN OUT; writes each JSON and OUT/table.md.
set -eu
BIN=$1
OUT=$2
mkdir -p "$OUT"
SIM_MODEL=results/2026-11-23-sim-calibration/llama-1b-h100.json
for n in 1 2 4 8; do
  for router in round_robin least_loaded prefix precise; do
    [[ $n == 1 && $router != round_robin ]] && continue  # one replica: the router has no choice
    SIM=(--model llama-1b --backend sim --sim-model "$SIM_MODEL" --data-parallel "$n"
         --router "$router" --block-size 16 --seed 1)
    "$BIN" bench --dataset-name nano256 --mode offline --max-num-seqs 256 \
      --max-num-batched-tokens 16384 --num-kv-blocks 136816 "${SIM[@]}" \
      --json "$OUT/nano256__n${n}__$router.json" >"$OUT/nano256__n${n}__$router.txt" 2>&1
    for mode in offline online; do
      rate=()
      [[ $mode == online ]] && rate=(--request-rate 64)
      "$BIN" bench --dataset-name prefix-groups:16:16:x2:64 --random-output-len 32 --mode "$mode" \
        "${rate[@]}" --max-num-seqs 256 --max-num-batched-tokens 16384 --num-kv-blocks 2048 \
        "${SIM[@]}" --json "$OUT/pg-${mode}__n${n}__$router.json" \
        >"$OUT/pg-${mode}__n${n}__$router.txt" 2>&1
    done
  done
done
python3 - "$OUT" "$(git rev-parse --short=12 HEAD)" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
out, commit = sys.argv[1], sys.argv[2]
rows = {}
for path in glob.glob(f"{out}/*.json"):
    workload, n, router = os.path.basename(path)[:-5].split("__")
    rows[(workload, int(n[1:]), router)] = json.load(open(path))["runs"][0]
print(f"commit {commit}; sim backend, step-time model {os.path.basename('llama-1b-h100.json')} "
      "(H100, llama-1b); predictions, not measurements\n")
print("| workload | replicas | router | output tok/s | x 1 replica | TTFT p50 (ms) | TTFT p99 (ms) | hit delivered | imbalance req / tok |")
print("|---|---|---|---|---|---|---|---|---|")
for (workload, n, router), r in sorted(rows.items()):
    one = rows.get((workload, 1, "round_robin"))
    scale = r["output_throughput"] / one["output_throughput"] if one else float("nan")
    imb = (f"{r['request_imbalance']:.2f} / {r['token_imbalance']:.2f}"
           if "request_imbalance" in r else "-")
    hit = r.get("routing_delivered_hit_rate", r.get("prefix_cache_hit_rate", 0))
    print(f"| {workload} | {n} | {router} | {r['output_throughput']:.0f} | {scale:.2f} | "
          f"{r['p50_ttft_ms']:.1f} | {r['p99_ttft_ms']:.1f} | {hit:.1%} | {imb} |")
PY
