#!/usr/bin/env bash
# The batch-1 SiLU-gated one-wave GEMV capped at 64 registers (8 resident blocks an SM), on the GPU
# machine with bundle-pack/ carried (roseinfer, roseinfer-base = the previous commit's build, and
# the GPU tests named below): the tests, then the previous and the new build side by side in three
# interleaved rounds on SmolLM2-135M's shape (random weights, bf16), once on gpt2 and llama-1b
# (their products do not take the capped kernel), and transformers' batch-1 decode on the same
# checkpoint. With QUANT_CAP set: the direct quantized GEMV's capped variants
# (ROSEINFER_CUDA_GEMV_QUANT_CAP=0/1/2, EXPERIMENT) on llama-1b and llama-8b Q4_K, two rounds.
# $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/wave_cap}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
gpu_tests
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
S=/tmp/models/smollm2-shape
for r in 1 2 3; do
  base_and_new_bench "smol_r$r" 1 --model "$S"
done
for m in gpt2 llama-1b; do
  base_and_new_bench "$m" 1 --model "$m"
done
if [[ -n ${QUANT_CAP:-} ]]; then
  for r in 1 2; do
    for m in llama-1b llama-8b; do
      for c in 0 1 2; do
        offline_bench "${m}_q4k_cap${c}_r$r" 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=$c --model $m --quantize q4_k
      done
    done
  done
  offline_bench llama-1b_q4_0_cap0 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=0 --model llama-1b --quantize q4_0
  offline_bench llama-1b_q4_0_cap2 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=2 --model llama-1b --quantize q4_0
  offline_bench llama-1b_q8_0_cap0 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=0 --model llama-1b --quantize q8_0
  offline_bench llama-1b_q8_0_cap2 1 ROSEINFER_CUDA_GEMV_QUANT_CAP=2 --model llama-1b --quantize q8_0
fi
peer_decode_b1 smollm2-shape "$S"
device_pack
