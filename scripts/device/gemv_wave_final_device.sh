#!/usr/bin/env bash
# The one-wave dense GEMV as the default for small matrices (issue 12), checked in one call
# (bundle-pack/ carried; $OUT: summary.txt and outputs.tgz): the kernel and backend GPU tests, then
# ROUNDS rounds (default 2) of batch-1 decode with the wave kernel off (ROSEINFER_CUDA_GEMV_WAVE=0,
# the previous code's path) and at the default, on a random SmolLM2-135M-shaped checkpoint, gpt2
# and llama-1b in bf16 (MODELS), and transformers' batch-1 decode of the same SmolLM2-shaped
# checkpoint (PEER=0: not).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/gemv_wave_final
step gpu_test_cuda_kernels 300 "$B/gpu_test_cuda_kernels"
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
MODELS=${MODELS:-/tmp/models/smollm2-shape gpt2 llama-1b}
if [[ $MODELS == */tmp/models/smollm2-shape* ]]; then
  step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in $MODELS; do
    name=$(basename "$model")
    offline_bench "${name}_wave0_r$round" 1 ROSEINFER_CUDA_GEMV_WAVE=0 --model "$model"
    offline_bench "${name}_default_r$round" 1 --model "$model"
  done
done
if [[ ${PEER:-1} == 1 && -d /tmp/models/smollm2-shape ]]; then
  peer_decode_b1 smollm2-shape /tmp/models/smollm2-shape
fi
device_pack
cat "$SUMMARY"
