#!/usr/bin/env bash
# Where the int8 tensor-core GEMV's time goes (issue 12), on the GPU machine from the repository
# root with bundle-pack/ carried (gpu_bench_gemv_quant_mma): ncu's full set on one launch each of
# llama-8b gate|up at 32 and at 8 rows (four column tiles at two blocks an SM; one column tile) and
# llama-1b down at 32 rows (four column tiles, one block an SM), inside the timing driver's graphs
# (each product's kernel runs 400 times: two replays of 200; --launch-skip picks the first launch
# of the timed replay's product). Writes the report, its details page and its SASS source page
# (stall samples by instruction).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/mma_stalls_out
profile() {  # NAME MODEL ROWS SKIP
  local name=$1
  step "$name" 75 env ROSEINFER_BENCH_MODELS="$2" ROSEINFER_BENCH_ROWS="$3" \
    ncu --clock-control none --set full --import-source no --kernel-name regex:gemv_mma_kernel \
    --launch-skip "$4" --launch-count 1 -o "$OUT/$name" "$B/gpu_bench_gemv_quant_mma" --no-skip
  ncu -i "$OUT/$name.ncu-rep" --page details --csv >"$OUT/${name}_details.csv" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --print-source sass --csv >"$OUT/${name}_sass.csv" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page raw --csv >"$OUT/${name}_raw.csv" 2>&1
  python3 - "$OUT/${name}_raw.csv" "$name" <<'PY' | tee -a "$SUMMARY"
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.reader(lines))
if len(rows) >= 3:
    names, values = rows[0], rows[2]
    prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    stalls = sorted(((float(v.replace(",", "")), n[len(prefix):-len(suffix)])
                     for n, v in zip(names, values)
                     if n.startswith(prefix) and n.endswith(suffix) and v.replace(",", "").replace(".", "").isdigit()),
                    reverse=True)
    print(sys.argv[2], "stalls (warps per issue):", ", ".join(f"{n} {v:.2f}" for v, n in stalls[:8]))
PY
  python3 - "$OUT/${name}_details.csv" "$name" <<'PY' | tee -a "$SUMMARY"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
keep = ("Duration", "Memory Throughput", "DRAM Throughput", "Compute (SM) Throughput",
        "Executed Ipc Active", "Issue Slots Busy", "Achieved Occupancy", "Registers Per Thread",
        "Warp Cycles Per Issued Instruction", "No Eligible")
for r in rows:
    if r.get("Metric Name", "").startswith(keep):
        print(sys.argv[2], r["Metric Name"], r["Metric Value"], r.get("Metric Unit", ""))
PY
}
profile gateup_8b_r32 llama-8b 32 800
profile down_1b_r32 llama-1b 32 1200
profile gateup_8b_r8 llama-8b 8 800
device_pack
