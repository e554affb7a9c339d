#!/usr/bin/env bash
# Session 39 call 8: where the warp-specialized kernel's warps wait. Call 6's kernel
# (experiment-call6-7.diff, plus a ROSEINFER_BENCH_SHAPES filter in the bench, not committed) on
# llama-1b Q4_K gate|up at 256 rows, one warm launch under Nsight Compute: speed of light, warp
# states, memory, and the stall samples per SASS instruction, summed by opcode.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call8
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
echo "ncu: ${NCU:-none}" | tee -a "$SUMMARY"
if [[ -z $NCU ]]; then device_pack; exit 0; fi
export ROSEINFER_BENCH_FORCE_TILE=12 ROSEINFER_BENCH_N=256 ROSEINFER_BENCH_TYPES=Q4_K \
  ROSEINFER_BENCH_MODELS=llama-1b ROSEINFER_BENCH_TILES=0 ROSEINFER_BENCH_MS=1 \
  ROSEINFER_BENCH_SHAPES="gate|up"
step ncu_ws 300 "$NCU" --kernel-name regex:gemm_quant_ws --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  --section MemoryWorkloadAnalysis -o "$OUT/ws" -f "$B/gpu_bench_gemm_quant" --no-skip
step ncu_details 120 "$NCU" --import "$OUT/ws.ncu-rep" --page details
step ncu_source 120 "$NCU" --import "$OUT/ws.ncu-rep" --page source --csv --print-source sass
python3 - "$OUT/ncu_source.txt" <<'PY' | tee -a "$SUMMARY"
import csv, collections, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next((i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r)), None)
if head is None:
    print("no source table"); sys.exit()
cols = rows[head]
def col(part):
    return next((i for i, c in enumerate(cols) if part in c), None)
src, allc, notc = col("Source"), col("Warp Stall Sampling (All"), col("Warp Stall Sampling (Not")
print("columns:", [c for c in cols][:12])
def num(r, i):
    try: return float(r[i].replace(",", "")) if i is not None and i < len(r) else 0.0
    except ValueError: return 0.0
body = [r for r in rows[head + 1:] if len(r) > max(src, allc or 0)]
total = sum(num(r, allc) for r in body) or 1.0
by_op = collections.Counter()
for r in body: by_op[r[src].split()[0] if r[src].split() else "?"] += num(r, allc)
print("stall samples by opcode (share of all):")
for op, v in by_op.most_common(15): print(f"  {op:24s} {v / total:6.1%}")
print("top instructions:")
for r in sorted(body, key=lambda r: -num(r, allc))[:25]:
    print(f"  {num(r, allc) / total:6.1%}  {r[src][:90]}")
PY
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps" "$OUT/ncu_details.txt" | head -20 | tee -a "$SUMMARY"
device_pack
