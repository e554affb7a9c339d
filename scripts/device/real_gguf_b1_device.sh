#!/usr/bin/env bash
# The real SmolLM2-135M Q4_1 GGUF at batch 1 on the GPU machine (issue 12): its blocks kept as they
# are (Q4_1, Q8_0 token_embd/lm_head), the same with the quantized GEMV's one-block build for every
# product (ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS=0: since c542fc8 its 49,152-feature lm_head takes
# the two-block build), and decoded to bf16 (--dtype bf16), ROUNDS rounds in turn; then
# transformers' batch-1 decode on a random checkpoint of the same shape
# (scripts/make_smollm2_shape.py) in the same call. From the repository root, after the model's
# parts are staged (scripts/model_parts.sh), with bundle-pack/ carried (roseinfer):
#   MODEL=$(scripts/model_parts.sh join) bash scripts/device/real_gguf_b1_device.sh
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/real_gguf_b1_out
MODEL=${MODEL:?MODEL=path to the joined GGUF}
for round in $(seq 1 "${ROUNDS:-2}"); do
  offline_bench "real_q4_1_r$round" 1 --model "$MODEL"
  offline_bench "real_q4_1_one_block_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS=0 --model "$MODEL"
  offline_bench "real_bf16_r$round" 1 --model "$MODEL" --dtype bf16
done
step make_smollm2_shape 150 python3 scripts/make_smollm2_shape.py /tmp/models
peer_decode_b1 smollm2-shape /tmp/models/smollm2-shape
device_pack
