#!/usr/bin/env bash
# The norms fused into the quantized decode GEMVs (issue 12), on the H100 with bundle-pack/ carried
# (bundle/roseinfer-base: the previous commit): the GPU tests that cover them; batch-1 decode, new binary beside the base, ROUNDS rounds
# (default 2); batches 2, 4 and 8 beside the base and with the other side of the default row cap
# (ROSEINFER_CUDA_FUSED_NORM=0 at batch 2, =8 above it); transformers' batch 1 on the gpt2 and
# llama-1b shapes (.peers/ carried). SKIP_TESTS=1 leaves the tests out.
set -uo pipefail
OUT=${OUT:-/tmp/fused_norm}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
if [[ ${SKIP_TESTS:-0} != 1 ]]; then
  step gpu_test_cuda_kernels 200 "$B/gpu_test_cuda_kernels"
  step gpu_test_cuda_gemv_quant 200 "$B/gpu_test_cuda_gemv_quant"
  step gpu_test_cuda_backend 200 "$B/gpu_test_cuda_backend"
  step gpu_test_cuda_batch_invariance 200 "$B/gpu_test_cuda_batch_invariance"
fi
pair() {  # NAME BATCH ARGS...: new, then base
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_new" "$batch" "$@"
  base_offline_bench "${name}_base" "$batch" "$@"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  pair "r${round}_llama-1b_b1" 1 --model llama-1b
  pair "r${round}_llama-1b_q4k_b1" 1 --model llama-1b --quantize q4_k
  pair "r${round}_llama-8b_q4k_b1" 1 --model llama-8b --quantize q4_k
  pair "r${round}_gpt2_b1" 1 --model gpt2
done
pair llama-8b_b1 1 --model llama-8b
pair llama-1b_b4 4 --model llama-1b
for batch in 2 4 8; do
  for model in llama-1b llama-8b; do
    [[ $batch == 8 && $model == llama-8b ]] && continue  # its load alone takes 20 s
    pair "${model}_q4k_b${batch}" "$batch" --model "$model" --quantize q4_k
    # below the default cap of 2 rows, the same binary unfused; above it, fused
    offline_bench "${model}_q4k_b${batch}_cap$([[ $batch == 2 ]] && echo 0 || echo 8)" "$batch" \
      ROSEINFER_CUDA_FUSED_NORM="$([[ $batch == 2 ]] && echo 0 || echo 8)" --model "$model" \
      --quantize q4_k
  done
done
peer_b1 gpt2 llama1b
device_pack
cat "$SUMMARY"
