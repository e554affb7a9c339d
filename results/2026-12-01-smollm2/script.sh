#!/usr/bin/env bash
# Session 43, the last of six calls on one warm nvidia-h200: call 1 unpacked roseinfer-base
# (6e0d82c) into /tmp/base, call 2 this session's build (roseinfer with the one-row norm path sixteen
# elements a thread for Q4_0 and Q4_1, and two GPU tests) into /tmp/new, calls 3-5 staged the real SmolLM2
# GGUF's parts 1-3 (scripts/model_parts.sh stage K); this one carries part 4 and .device-extra
# (the gguf wheel, for transformers' GGUF reader). Two GPU tests, then SmolLM2's own Q4_1 blocks at batch 1, base
# against new in two rounds; --dtype bf16; batch 256; transformers on the same file.
set -uo pipefail
MODEL=$({ scripts/model_parts.sh stage 4 >&2 && scripts/model_parts.sh join; }) || MODEL=""
mkdir -p bundle && cp /tmp/new/bundle/* /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/smollm2
[[ -n $MODEL ]] || { echo "no model" | tee -a "$SUMMARY"; exit 1; }
# The GPU tests first: the real GGUF's quantized logits against the CPU backend, and the GEMV's
# bits (the direct kernel against the staged one).
ROSEINFER_MODEL_CACHE=$(dirname "$MODEL") step gpu_test_cuda_real_quantized 240 \
  "$B/gpu_test_cuda_real_quantized" -s
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for round in 1 2; do
  base_and_new_bench "smollm2_b1_q4_1_r$round" 1 --model "$MODEL"
done
offline_bench smollm2_b1_bf16 1 --model "$MODEL" --dtype bf16
base_and_new_bench smollm2_b256_q4_1 256 --model "$MODEL"
if ls .device-extra/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .device-extra/*.whl && export PYTHONPATH=/tmp/site
fi
step peer_smollm2_b1 200 python3 scripts/peer_decode_b1.py "$MODEL" --json "$OUT/peer_smollm2_b1.json"
tail -n 1 "$OUT/peer_smollm2_b1.txt" | sed 's/^/peer_smollm2_b1: /' | tee -a "$SUMMARY"
decode_step_table
device_pack
