#!/usr/bin/env bash
# Session 54 call 4: where the pipelined n256 tile's time goes, for the next attempt at the
# K-quants at 256 rows. ncu's full set on gpu_bench_gemm_quant with every product forced onto
# wgmma 16x8w n256 (tile 9), llama-1b shapes, 256 rows: one launch of each launch configuration
# (qkv, o, gate|up and down differ in grid), for Q4_K and Q8_0 pipelined and Q4_K with
# ROSEINFER_GEMM_QUANT_PIPELINE=0. Writes each report's details, raw and SASS source pages, and
# the stall reasons and throughputs into the summary.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call4
profile() {  # NAME TYPE PIPELINE
  local name=$1
  step "$name" 150 env ROSEINFER_BENCH_MODELS=llama-1b ROSEINFER_BENCH_N=256 \
    ROSEINFER_BENCH_TYPES="$2" ROSEINFER_BENCH_FORCE_TILE=9 ROSEINFER_BENCH_TILES=0 \
    ROSEINFER_BENCH_MS=1 ROSEINFER_GEMM_QUANT_PIPELINE="$3" \
    ncu --clock-control none --set full --import-source no --kernel-name regex:gemm_quant_kernel \
    --filter-mode per-launch-config --launch-count 1 -o "$OUT/$name" \
    "$B/gpu_bench_gemm_quant" --no-skip
  ncu -i "$OUT/$name.ncu-rep" --page details --csv >"$OUT/${name}_details.csv" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page raw --csv >"$OUT/${name}_raw.csv" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --print-source sass --csv >"$OUT/${name}_sass.csv" 2>&1
  python3 - "$OUT/${name}_raw.csv" "$OUT/${name}_details.csv" "$name" <<'PY' | tee -a "$SUMMARY"
import csv, sys
raw = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
names = raw[0] if raw else []
prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
def number(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None
for i, values in enumerate(raw[2:]):
    grid = dict(zip(names, values)).get("launch__grid_size", "?")
    stalls = sorted(((number(v), n[len(prefix):-len(suffix)]) for n, v in zip(names, values)
                     if n.startswith(prefix) and n.endswith(suffix) and number(v) is not None),
                    reverse=True)
    print(sys.argv[3], f"launch {i} grid {grid} stalls:", ", ".join(f"{n} {v:.2f}" for v, n in stalls[:7]))
keep = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "L2 Cache Throughput",
        "Executed Ipc Active", "Issue Slots Busy", "Registers Per Thread", "No Eligible")
for r in csv.DictReader(l for l in open(sys.argv[2]) if l.startswith('"')):
    if r.get("Metric Name", "").startswith(keep):
        print(sys.argv[3], "launch", r.get("ID", "?"), r["Metric Name"], r["Metric Value"], r.get("Metric Unit", ""))
PY
}
profile q4k_pipe1 Q4_K 1
profile q8_0_pipe1 Q8_0 1
profile q4k_pipe0 Q4_K 0
device_pack
