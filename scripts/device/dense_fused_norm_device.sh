#!/usr/bin/env bash
# The norms fused into the dense decode GEMVs on the one-wave kernel (issue 12), in one call
# (bundle-pack/ carried; $OUT: summary.txt and outputs.tgz): the GPU tests in the bundle, then
# batch-1 decode of a random SmolLM2-135M-shaped checkpoint with ROSEINFER_CUDA_FUSED_NORM=0 (the
# add-norm kernels) and the default, ROUNDS rounds (default 2), llama-1b bf16 (which does not fuse:
# its gate|up is not on the one-wave kernel), transformers' batch-1 decode of the same checkpoint,
# and (NCU=1, the default) ncu's warp-state, memory and scheduler sections of the direct Q4_K
# GEMV at one row on gpu_bench_gemv_quant's shapes.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/dense_fused_norm
gpu_tests
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in $(seq 1 "${ROUNDS:-2}"); do
  offline_bench "smollm2-shape_unfused_r$round" 1 ROSEINFER_CUDA_FUSED_NORM=0 \
    --model /tmp/models/smollm2-shape
  offline_bench "smollm2-shape_fused_r$round" 1 --model /tmp/models/smollm2-shape
done
offline_bench llama-1b_bf16 1 --model llama-1b
peer_decode_b1 smollm2-shape /tmp/models/smollm2-shape
if [[ ${NCU:-1} == 1 && -x $B/gpu_bench_gemv_quant ]]; then
  step ncu_direct_q4_k 300 env ROSEINFER_BENCH_ITERS=10 ROSEINFER_BENCH_TYPES=Q4_K \
    ROSEINFER_BENCH_ROWS=1 ncu --clock-control none --csv --page raw -k regex:gemv_direct_kernel \
    --launch-count 300 --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats "$B/gpu_bench_gemv_quant" --no-skip
  xz -9 "$OUT/ncu_direct_q4_k.txt"
fi
device_pack
cat "$SUMMARY"
