#!/usr/bin/env bash
# ncu's full set on one decode launch of the kept tensor-core rows kernel
# (paged_attention_mma_rows_kernel), llama-1b bf16 at 256 rows: what bounds it now.
# Repository root, bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-mma-ncu
RUN=("$B/roseinfer" bench --device cuda --mode offline --dataset-name grid:256:512:128
  --max-num-seqs 256 --max-num-batched-tokens 16384 --model llama-1b --no-cuda-graph)
step ncu_b256 300 ncu --set full -k regex:paged_attention_mma_rows --launch-skip 64 \
  --launch-count 1 -o "$OUT/b256" "${RUN[@]}"
step details_b256 60 ncu -i "$OUT/b256.ncu-rep" --page details
grep -iE "^ +(Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Eligible Warps|Executed Ipc|Waves Per SM|Grid Size)" \
  "$OUT/details_b256.txt" | sed "s/^ */b256: /" | tee -a "$SUMMARY"
step raw_b256 60 ncu -i "$OUT/b256.ncu-rep" --page raw --csv
python3 - "$OUT/raw_b256.txt" <<'PY' | tee -a "$SUMMARY"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(r for r in rows if "ID" in r)
vals = rows[-1]
stalls = [(h, v) for h, v in zip(head, vals)
          if h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio")]
stalls = sorted(((h, float(v)) for h, v in stalls if v.replace('.', '', 1).isdigit()), key=lambda x: -x[1])[:8]
for h, v in stalls: print("b256 stall", h[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")], v)
for h, v in zip(head, vals):
    if h in ("smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "dram__bytes_read.sum"):
        print("b256", h, v)
PY
rm -f "$OUT"/*.ncu-rep
device_pack
