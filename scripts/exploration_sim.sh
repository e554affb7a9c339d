#!/usr/bin/env bash
# What the prefix router's exploration (--router-exploration: the probability of placing a request
# by load alone, GAIE's "bypass with prob 0.01 to seed other pods", our default) costs or buys, on
# the sim backend: the 2-GPU study's prefix groups (prefixes totalling twice one replica's KV),
# offline and online at 64 req/s, 2 to 8 replicas, exploration 0 / 0.01 / 0.05 over three seeds,
# beside the precise router (the replicas' own indexes, the bound). SPEC=... picks another
# prefix-groups workload (e.g. a Zipf-skewed one, where one hot group needs several replicas).
# Usage: [SPEC=prefix-groups:...] scripts/exploration_sim.sh BIN OUT   (each JSON, OUT/table.md)
set -eu
BIN=$1
OUT=$2
mkdir -p "$OUT"
SIM_MODEL=results/2026-11-23-sim-calibration/llama-1b-h100.json
SPEC=${SPEC:-prefix-groups:16:16:x2:64}
run() {  # NAME MODE N SEED ROUTER-ARGS...
  local name=$1 mode=$2 n=$3 seed=$4
  shift 4
  local rate=()
  [[ $mode == online ]] && rate=(--request-rate 64)
  "$BIN" bench --model llama-1b --backend sim --sim-model "$SIM_MODEL" --block-size 16 \
    --dataset-name "$SPEC" --random-output-len 32 --mode "$mode" "${rate[@]}" \
    --max-num-seqs 256 --max-num-batched-tokens 16384 --num-kv-blocks 2048 --data-parallel "$n" \
    --seed "$seed" "$@" --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
}
for mode in offline online; do
  for n in 2 4 8; do
    for seed in 1 2 3; do
      run "${mode}__n${n}__s${seed}__round_robin" "$mode" "$n" "$seed" --router round_robin
      run "${mode}__n${n}__s${seed}__precise" "$mode" "$n" "$seed" --router precise
      for e in 0 0.01 0.05; do
        run "${mode}__n${n}__s${seed}__prefix-e$e" "$mode" "$n" "$seed" --router prefix \
          --router-exploration "$e"
      done
    done
  done
done
python3 - "$OUT" "$(git rev-parse --short=12 HEAD)" "$SPEC" <<'PY' | tee "$OUT/table.md"
import collections, glob, json, os, statistics, sys
out, commit, spec = sys.argv[1], sys.argv[2], sys.argv[3]
cells = collections.defaultdict(list)
for path in glob.glob(f"{out}/*.json"):
    mode, n, seed, router = os.path.basename(path)[:-5].split("__")
    cells[(mode, int(n[1:]), router)].append((seed, json.load(open(path))["runs"][0]))
cells = {key: [run for _, run in sorted(runs, key=lambda sr: sr[0])] for key, runs in cells.items()}
print(f"commit {commit}; sim backend, step-time model llama-1b-h100.json; "
      f"{spec}, 2,048 blocks of 16 per replica; mean over seeds 1-3 (min-max)\n")
print("| mode | replicas | router | delivered hits | TTFT p50 ms | TTFT p50 / round robin | output tok/s |")
print("|---|---|---|---|---|---|---|")
def span(vals, fmt):
    return f"{fmt(statistics.mean(vals))} ({fmt(min(vals))}-{fmt(max(vals))})"
for key in sorted(cells):
    mode, n, router = key
    runs = cells[key]
    rr = cells[(mode, n, "round_robin")]
    hits = [r["routing_delivered_hit_rate"] for r in runs]
    ttft = [r["p50_ttft_ms"] for r in runs]
    ratio = [a["p50_ttft_ms"] / b["p50_ttft_ms"] for a, b in zip(runs, rr)]
    tput = [r["output_throughput"] for r in runs]
    print(f"| {mode} | {n} | {router} | {span(hits, lambda v: f'{v:.1%}')} | "
          f"{span(ttft, lambda v: f'{v:.1f}')} | {span(ratio, lambda v: f'{v:.2f}')} | "
          f"{span(tput, lambda v: f'{v:.0f}')} |")
PY
