#!/usr/bin/env bash
# Where a batch-1 GEMV's fixed cost goes, in the graphed step (issue 12's 2.5x, issue 13's 0.6x):
# the same bench with the GEMVs' work cut away piece by piece, kernel boundaries kept
# (ROSEINFER_CUDA_GEMV_QUANT_PROBE=1: the quantized GEMV skips its norm + x quantization, =2: also
# its weights, =3: it returns right after its PDL wait; ROSEINFER_CUDA_GEMV_PROBE=3: the dense GEMV
# returns after its wait), and with the GEMVs left out (ROSEINFER_CUDA_SKIP=gemv: no boundaries).
# Outputs are wrong in every probe; step times are real. Then ncu's per-instruction stall samples
# of one layer's four direct Q4_K GEMVs (llama-1b, graph off). bundle-pack/ carried.
set -uo pipefail
OUT=${OUT:-/tmp/fixed_cost_probe}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
for p in 0 1 2 3; do
  offline_bench "l1b_q4k_probe$p" 1 ROSEINFER_CUDA_GEMV_QUANT_PROBE=$p --model llama-1b --quantize q4_k
done
offline_bench l1b_q4k_skipgemv 1 ROSEINFER_CUDA_SKIP=gemv --model llama-1b --quantize q4_k
for p in 0 3; do
  offline_bench "l1b_bf16_probe$p" 1 ROSEINFER_CUDA_GEMV_PROBE=$p --model llama-1b
done
offline_bench l1b_bf16_skipgemv 1 ROSEINFER_CUDA_SKIP=gemv --model llama-1b
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
S=/tmp/models/smollm2-shape
for p in 0 3; do
  offline_bench "smol_probe$p" 1 ROSEINFER_CUDA_GEMV_PROBE=$p --model $S
done
offline_bench smol_skipgemv 1 ROSEINFER_CUDA_SKIP=gemv --model $S
for p in 0 1 3; do
  offline_bench "l8b_q4k_probe$p" 1 ROSEINFER_CUDA_GEMV_QUANT_PROBE=$p --model llama-8b --quantize q4_k
done
offline_bench l8b_q4k_skipgemv 1 ROSEINFER_CUDA_SKIP=gemv --model llama-8b --quantize q4_k
# Stall samples by instruction: launches 200..203 of gemv_direct_kernel are layer 1's qkv, o,
# gate|up and down (65 a step: 16 layers x 4 + the lm_head).
step ncu_full 300 ncu --clock-control none --set full --import-source yes \
  -k regex:gemv_direct_kernel --launch-skip 200 --launch-count 4 -o "$OUT/full" \
  "$B/roseinfer" bench --device cuda --mode offline --dataset-name grid:1:512:128 \
  --model llama-1b --quantize q4_k --no-cuda-graph
step ncu_details 60 ncu -i "$OUT/full.ncu-rep" --page details
step ncu_source 60 ncu -i "$OUT/full.ncu-rep" --page source --csv --print-source sass
python3 - "$OUT/ncu_source.txt" <<'PY' | tee "$OUT/stalls.txt" >>"$SUMMARY"
import csv, io, sys
text = open(sys.argv[1], errors="replace").read().splitlines()
tables, cur = [], None
for line in text:
    if line.startswith('"#"') or line.startswith('"Address"') or (line.startswith('"') and "Source" in line and "Address" in line):
        cur = [line]; tables.append(cur)
    elif cur is not None and line.startswith('"'):
        cur.append(line)
for t in tables:
    rows = list(csv.reader(io.StringIO("\n".join(t))))
    head = rows[0]
    cols = [i for i, h in enumerate(head) if "Sampling (All" in h]
    src = next((i for i, h in enumerate(head) if h == "Source"), None)
    if not cols or src is None:
        print("columns:", head[:12]); continue
    c = cols[0]
    body = [r for r in rows[1:] if len(r) > c]
    tot = sum(float(r[c] or 0) for r in body)
    print(f"--- table: {len(body)} instructions, {tot:.0f} samples; columns {head[c]}")
    run = 0
    for i, r in enumerate(body):
        v = float(r[c] or 0)
        if v >= 0.01 * tot:
            print(f"{i:5d} {v:7.0f} {100*v/tot:5.1f}%  {r[src][:90]}")
PY
rm -f "$OUT/full.ncu-rep"
grep -E "Duration|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|DRAM Throughput" "$OUT/ncu_details.txt" | head -40 | tee -a "$SUMMARY"
device_pack
