#!/usr/bin/env bash
# Two batch-1 changes of issue 12 measured in one call (bundle-pack/ carried; $OUT: summary.txt and
# outputs.tgz), after the GPU tests of the kernels and the backend:
# - the direct quantized GEMV's L2 window asked as one bulk request per item and weight row
#   (ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD=N, default bulk; _lane: ROSEINFER_CUDA_GEMV_QUANT_L2_BULK=0):
#   gpu_bench_gemv_quant's Q4_K shapes at one row, then llama-1b / llama-8b `--quantize q4_k`;
# - the norms fused into SmolLM2-135M's dense qkv and gate|up on the one-wave kernel:
#   ROSEINFER_CUDA_FUSED_NORM=0 (the add-norm kernels) against the default, on a random
#   SmolLM2-shaped checkpoint, with transformers' batch-1 decode of it.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/l2_bulk_norm
for t in gpu_test_cuda_kernels gpu_test_cuda_backend gpu_test_cuda_gemv_quant; do
  step "$t" 300 "$B/$t"
done
kernel_bench() {  # NAME VAR=VALUE...
  local name=$1
  shift
  step "kernel_q4_k_$name" 120 env "$@" ROSEINFER_BENCH_TYPES=Q4_K ROSEINFER_BENCH_ROWS=1 \
    "$B/gpu_bench_gemv_quant" --no-skip
}
kernel_bench ahead0 ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD=0
for ahead in 1 2 4; do
  kernel_bench "bulk$ahead" ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD="$ahead"
done
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
for round in 1 2; do
  for model in llama-1b llama-8b; do
    for ahead in 0 1 2 4; do
      offline_bench "${model}_q4_k_bulk${ahead}_r$round" 1 \
        ROSEINFER_CUDA_GEMV_QUANT_L2_AHEAD="$ahead" --model "$model" --quantize q4_k
    done
  done
  offline_bench "smollm2-shape_unfused_r$round" 1 ROSEINFER_CUDA_FUSED_NORM=0 \
    --model /tmp/models/smollm2-shape
  offline_bench "smollm2-shape_fused_r$round" 1 --model /tmp/models/smollm2-shape
done
step peer_smollm2-shape_b1 200 python3 scripts/peer_decode_b1.py /tmp/models/smollm2-shape \
  --json "$OUT/peer_smollm2-shape_b1.json"
tail -n 1 "$OUT/peer_smollm2-shape_b1.txt" | sed 's/^/peer_smollm2-shape_b1: /' | tee -a "$SUMMARY"
device_pack
cat "$SUMMARY"
