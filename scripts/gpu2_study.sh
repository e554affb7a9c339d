#!/usr/bin/env bash
# Data parallel on two GPUs (device kind nvidia-h200-x2; NCCL_NVLS_ENABLE=0 as that machine sets
# it), llama-1b synthetic weights, bundle-pack/ carried. Writes each bench JSON and table.md into
# $OUT/gpu2.tgz:
#   - nano256 on one GPU, then --data-parallel 2 (round_robin, least_loaded), and over
#     `mpirun -np 2` (one replica per rank);
#   - prefix groups whose prefixes total 2x one replica's KV (--num-kv-blocks caps it), offline and
#     online, under every router;
#   - a workload with no sharing under least_loaded and prefix.
set -uo pipefail
FINAL=${OUT:-/tmp/gpu2_out}
OUT=/tmp/gpu2_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a "$OUT/device.txt"
DEADLINE=${DEADLINE:-500}
bench() {  # NAME ARGS...
  local name=$1
  shift
  if ((SECONDS > DEADLINE)); then echo "$name: skipped (past ${DEADLINE}s)" | tee -a "$SUMMARY"; return 0; fi
  step "$name" 150 "$B/roseinfer" bench --model llama-1b --device cuda "$@" --json "$OUT/$name.json"
}
NANO=(--dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 --mode offline)
bench nano256__1gpu "${NANO[@]}"
bench nano256__dp2_round_robin "${NANO[@]}" --data-parallel 2 --router round_robin
bench nano256__dp2_least_loaded "${NANO[@]}" --data-parallel 2 --router least_loaded
KV=(--num-kv-blocks 2048 --block-size 16 --max-num-seqs 256 --max-num-batched-tokens 16384 --seed 1)
PG=(--dataset-name prefix-groups:16:16:x2:64 --random-output-len 32)
for router in round_robin least_loaded prefix precise; do
  bench "pg_offline__$router" "${PG[@]}" "${KV[@]}" --data-parallel 2 --router "$router" --mode offline
done
for router in round_robin least_loaded prefix precise; do
  bench "pg_online__$router" "${PG[@]}" "${KV[@]}" --data-parallel 2 --router "$router" \
    --mode online --request-rate 64
done
for router in least_loaded prefix; do
  bench "nosharing__$router" --dataset-name random --num-prompts 512 --random-input-len 512 \
    --random-output-len 64 "${KV[@]}" --data-parallel 2 --router "$router" --mode offline
done
if ((SECONDS <= DEADLINE)); then
  step nano256__mpi2_round_robin 150 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH \
    -x NCCL_NVLS_ENABLE "$B/roseinfer" bench --model llama-1b --device cuda "${NANO[@]}" \
    --data-parallel 2 --router round_robin --json "$OUT/nano256__mpi2_round_robin.json"
fi
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
out = sys.argv[1]
rows = []
for path in sorted(glob.glob(f"{out}/*.json")):
    d = json.load(open(path))
    r = d["runs"][0]
    rows.append((os.path.basename(path)[:-5], d.get("device", "?"), r))
print("| run | device | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | hit delivered | hit available | imbalance req / tok |")
print("|---|---|---|---|---|---|---|---|")
base = {}
for name, device, r in rows:
    g = lambda k, f="{:.1%}": f.format(r[k]) if isinstance(r.get(k), (int, float)) else "-"
    print(f"| {name} | {device} | {r['output_throughput']:.0f} | {r['median_ttft_ms']:.1f} | "
          f"{r['p99_ttft_ms']:.1f} | {g('routing_delivered_hit_rate')} | "
          f"{g('routing_available_hit_rate')} | {g('request_imbalance', '{:.2f}')} / "
          f"{g('token_imbalance', '{:.2f}')} |")
one = next((r for n, _, r in rows if n == "nano256__1gpu"), None)
for name, _, r in rows:
    if one and name.startswith("nano256__") and name != "nano256__1gpu":
        print(f"\n{name}: {r['output_throughput'] / one['output_throughput']:.2f}x one GPU")
PY
tar czf "$FINAL/gpu2.tgz" -C "$OUT" .
cat "$SUMMARY"
