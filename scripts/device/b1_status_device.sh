#!/usr/bin/env bash
# The batch-1 status of issue 12 on whatever GPU this is, in one call (bundle-pack/ carried, .peers/
# from ../shared/peers for transformers' figures; $OUT: summary.txt and outputs.tgz): the GPU test
# programs in the bundle, then batch-1 decode of gpt2, llama-1b and llama-8b in bf16 and
# `--quantize q4_k`, a random SmolLM2-135M-shaped checkpoint in bf16 (the one-wave GEMV off and
# on), and transformers' batch-1 decode of gpt2, llama-1b and the SmolLM2 shape.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/b1_status
# SKIP_TESTS=1: not the GPU tests (a caller that has just run them in the same call).
if [[ ${SKIP_TESTS:-0} != 1 ]]; then
  gpu_tests
fi
[[ -d /tmp/models/smollm2-shape ]] || step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
offline_bench smollm2-shape_bf16_wave0 1 ROSEINFER_CUDA_GEMV_WAVE=0 --model /tmp/models/smollm2-shape
offline_bench smollm2-shape_bf16 1 --model /tmp/models/smollm2-shape
for model in gpt2 llama-1b llama-8b; do
  offline_bench "${model}_bf16" 1 --model "$model"
  [[ $model == gpt2 ]] || offline_bench "${model}_q4_k" 1 --model "$model" --quantize q4_k
done
peer_b1 gpt2 llama1b
peer_decode_b1 smollm2-shape /tmp/models/smollm2-shape
device_pack
cat "$SUMMARY"
