#!/usr/bin/env bash
# The direct quantized GEMV loading its first two items before the PDL wait, so the x preparation
# after the wait overlaps both (ROSEINFER_CUDA_GEMV_QUANT_EARLY_ITEMS=1: the first only, the
# second after the preparation, as before), issue 12, on the GPU machine from the repository root
# with bundle-pack/ carried (roseinfer, gpu_test_cuda_gemv_quant, gpu_bench_gemv_quant_mma): the
# kernel test; batch-1 (and 4) decode of llama-8b and llama-1b `--quantize q4_k` both ways in two
# interleaved rounds, bf16 beside them, llama-1b's other types at batch 1; then ncu on the int8
# tensor-core GEMV's staged and register paths (llama-8b gate|up at 8 rows) for occupancy and
# shared-memory configuration (the staged path lost at 8-24 rows: results/2026-11-30-mma-staged).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/direct_two_early_out
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
both() {  # NAME BATCH ARGS...
  local name=$1
  shift
  offline_bench "${name}_one" "$1" ROSEINFER_CUDA_GEMV_QUANT_EARLY_ITEMS=1 "${@:2}"
  offline_bench "${name}_two" "$@"
}
for round in 1 2; do
  both "llama8b_b1_q4_k_r$round" 1 --model llama-8b --quantize q4_k
  both "llama1b_b1_q4_k_r$round" 1 --model llama-1b --quantize q4_k
done
offline_bench llama8b_b1_bf16 1 --model llama-8b
offline_bench llama1b_b1_bf16 1 --model llama-1b
both llama8b_b4_q4_k 4 --model llama-8b --quantize q4_k
both llama1b_b4_q4_k 4 --model llama-1b --quantize q4_k
for type in q8_0 q4_0 q4_k_m; do
  both "llama1b_b1_$type" 1 --model llama-1b --quantize "$type"
done
decode_step_table
profile() {  # NAME SKIP: llama-8b gate|up at 8 rows; skip 1600: staged, 2000: registers (400 launches a path)
  local name=$1
  step "$name" 90 env ROSEINFER_BENCH_MODELS=llama-8b ROSEINFER_BENCH_ROWS=8 \
    ncu --clock-control none --set full --import-source no --kernel-name regex:gemv_mma_kernel \
    --launch-skip "$2" --launch-count 1 -o "$OUT/$name" "$B/gpu_bench_gemv_quant_mma" --no-skip
  ncu -i "$OUT/$name.ncu-rep" --page details --csv >"$OUT/${name}_details.csv" 2>&1
  rm -f "$OUT/$name.ncu-rep"
  python3 - "$OUT/${name}_details.csv" "$name" <<'PY' | tee -a "$SUMMARY"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
keep = ("Duration", "DRAM Throughput", "Executed Ipc Active", "Issue Slots Busy",
        "Achieved Occupancy", "Theoretical Occupancy", "Registers Per Thread", "Block Limit",
        "Shared Memory Configuration Size", "Dynamic Shared Memory Per Block",
        "Warp Cycles Per Issued Instruction", "No Eligible", "Function Name", "Grid Size")
for r in rows:
    if r.get("Metric Name", "").startswith(keep):
        print(sys.argv[2], r["Metric Name"], r["Metric Value"], r.get("Metric Unit", ""))
PY
}
profile mma_staged_gateup_8b_r8 1600
profile mma_registers_gateup_8b_r8 2000
device_pack
