#!/usr/bin/env bash
# The norms after the dense o and down GEMVs (issue 12), on the H100 with bundle-pack/ carried: the
# GPU tests that cover them and memcheck of their cases; batch-1 bf16 decode of llama-1b, llama-8b
# and a random SmolLM2-135M-shaped checkpoint (scripts/make_smollm2_shape.py), each with the norms
# after the GEMVs (the default) and with ROSEINFER_CUDA_FUSED_NORM=0 (the add-norm kernels) in
# alternation, ROUNDS rounds (default 3); llama-1b at batches 2 and 4 the same way; transformers
# on the SmolLM2 shape. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/norm_after}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
step gpu_test_cuda_kernels 240 "$B/gpu_test_cuda_kernels"
step gpu_test_cuda_backend 240 "$B/gpu_test_cuda_backend"
step memcheck_kernels_norm_after 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$B/gpu_test_cuda_kernels" -tc="gemv with the norm after*"
step memcheck_backend_norm_after 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
  "$B/gpu_test_cuda_backend" -tc="norms after*"
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
SMOL=/tmp/models/smollm2-shape
ab() {  # NAME BATCH ARGS...: the default, then the add-norm kernels
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_after" "$batch" "$@"
  offline_bench "${name}_kernels" "$batch" ROSEINFER_CUDA_FUSED_NORM=0 "$@"
}
for round in $(seq 1 "${ROUNDS:-3}"); do
  ab "r${round}_llama-1b_b1" 1 --model llama-1b
  ab "r${round}_smollm2_b1" 1 --model "$SMOL"
done
for round in 1 2; do
  ab "r${round}_llama-8b_b1" 1 --model llama-8b
  ab "r${round}_llama-1b_b2" 2 --model llama-1b
  ab "r${round}_llama-1b_b4" 4 --model llama-1b
  ab "r${round}_smollm2_b4" 4 --model "$SMOL"
done
offline_bench llama-1b_q4k_b1 1 --model llama-1b --quantize q4_k
offline_bench gpt2_b1 1 --model gpt2
step peer_smollm2_b1 150 python3 scripts/peer_decode_b1.py "$SMOL" --json "$OUT/peer_smollm2_b1.json"
tail -n 1 "$OUT/peer_smollm2_b1.txt" | sed "s/^/peer_smollm2_b1: /" | tee -a "$SUMMARY"
device_pack
cat "$SUMMARY"
