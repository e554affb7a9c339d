#!/usr/bin/env bash
# ncu's full set on one decode launch of the split-KV rows kernel, llama-1b bf16 at 256 and 64
# rows, the register path (ROSEINFER_CUDA_ATTENTION_ROWS_STAGES=0) and the 2-stage ring (2).
# Run from the repository root with bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-ncu
for b in 256 64; do
  for stages in 0 2; do
    name="b${b}_s$stages"
    RUN=("$B/roseinfer" bench --device cuda --mode offline --dataset-name "grid:$b:512:128"
      --max-num-seqs 256 --max-num-batched-tokens 16384 --model llama-1b --no-cuda-graph)
    step "ncu_$name" 300 env ROSEINFER_CUDA_ATTENTION_ROWS_STAGES=$stages ncu --set full \
      -k regex:paged_attention_rows --launch-skip 64 --launch-count 1 -o "$OUT/$name" "${RUN[@]}"
    step "details_$name" 60 ncu -i "$OUT/$name.ncu-rep" --page details
    grep -iE "^ +(Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Eligible Warps|Executed Ipc|Dynamic Shared|Waves Per SM|Grid Size)" \
      "$OUT/details_$name.txt" | sed "s/^ */$name: /" | tee -a "$SUMMARY"
    step "raw_$name" 60 ncu -i "$OUT/$name.ncu-rep" --page raw --csv
    python3 - "$OUT/raw_$name.txt" "$name" <<'PY' | tee -a "$SUMMARY"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(r for r in rows if "smsp__pcsamp_warps_issue_stalled_long_scoreboard" in r or "ID" in r)
vals = rows[-1]
stalls = [(h, v) for h, v in zip(head, vals) if h.startswith("smsp__average_warp_latency_issue_stalled") or h.startswith("smsp__average_warps_issue_stalled_") and h.endswith("_per_issue_active.ratio")]
stalls = sorted(((h, float(v)) for h, v in stalls if v.replace('.', '', 1).isdigit()), key=lambda x: -x[1])[:8]
for h, v in stalls: print(sys.argv[2], "stall", h, v)
PY
  done
done
device_pack
