#!/usr/bin/env bash
# Where the quantized GEMV's batch-1 time goes (issue 12), on the GPU machine (bundle-pack/
# carried, holding gpu_bench_gemv_quant): ncu on every batch-1 Q4_K launch
# of it (kRows = 1) and on the bf16 GEMV of the same shapes, with the speed-of-light, occupancy,
# launch, warp-state and memory sections. $OUT gets ncu_*.csv (one row per launch and metric) and
# summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/gemv_quant_profile}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
profile() {  # NAME KERNEL_REGEX ENV...: ncu on the bench's launches of that kernel, one CSV row
  # per launch and metric (the bench's ROSEINFER_BENCH_TYPES / _ROWS select what it launches)
  local name=$1 kernel=$2
  shift 2
  step "ncu_$name" 300 env ROSEINFER_BENCH_ITERS=10 "$@" ncu --clock-control none --csv \
    --page details -k "regex:$kernel" --launch-count 300 $SECTIONS "$B/gpu_bench_gemv_quant" --no-skip
  grep '^"' "$OUT/ncu_$name.txt" >"$OUT/ncu_$name.csv" && rm -f "$OUT/ncu_$name.txt"
}
profile q4k gemv_quant_kernel ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=1
profile bf16 gemv_kernel ROSEINFER_BENCH_TYPES=none ROSEINFER_BENCH_ROWS=1
cat "$SUMMARY"
