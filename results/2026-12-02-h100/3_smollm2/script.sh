#!/usr/bin/env bash
# Session 49, the last of six calls on one warm nvidia-h100-x1: call 1 left this session's bundle
# in /tmp/new, calls 3-6 staged the real SmolLM2 GGUF's parts 1-4 (scripts/model_parts.sh stage K);
# this one carries part 5 and .device-extra (the gguf wheel, for transformers' GGUF reader). Then
# SmolLM2-135M-Instruct Q4_1 at batch 1 with its blocks kept and with
# --dtype bf16 (two rounds each), batch 256 both ways, and transformers on the same file.
set -uo pipefail
MODEL=$({ scripts/model_parts.sh stage 5 >&2 && scripts/model_parts.sh join; }) || MODEL=""
mkdir -p bundle && cp /tmp/new/bundle/* bundle/
source scripts/device_step.sh
device_begin /tmp/smollm2
[[ -n $MODEL ]] || { echo "no model" | tee -a "$SUMMARY"; exit 1; }
# The GPU tests (the real GGUF's among them) run in the next call, from bundle-tests/: both
# archives together are over the carry limit beside a model part.
for round in 1 2; do
  offline_bench "smollm2_b1_q4_1_r$round" 1 --model "$MODEL"
  offline_bench "smollm2_b1_bf16_r$round" 1 --model "$MODEL" --dtype bf16
done
offline_bench smollm2_b256_q4_1 256 --model "$MODEL"
offline_bench smollm2_b256_bf16 256 --model "$MODEL" --dtype bf16
if ls .device-extra/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .device-extra/*.whl && export PYTHONPATH=/tmp/site
fi
step peer_smollm2_b1 200 python3 scripts/peer_decode_b1.py "$MODEL" --json "$OUT/peer_smollm2_b1.json"
tail -n 1 "$OUT/peer_smollm2_b1.txt" | sed 's/^/peer_smollm2_b1: /' | tee -a "$SUMMARY"
decode_step_table
device_pack
