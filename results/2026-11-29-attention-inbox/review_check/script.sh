#!/usr/bin/env bash
# Review check: GPU tests, and base (427484f) against new at batch 1 and 64.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/review_check
for t in "$B"/gpu_test_*; do [[ -x $t ]] && step "$(basename "$t")" 300 "$t"; done
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
base_and_new_bench smollm2_b1 1 --model /tmp/models/smollm2-shape
base_and_new_bench llama-1b_b1 1 --model llama-1b
base_and_new_bench llama-1b_b64 64 --model llama-1b
base_and_new_bench llama-1b_b16 16 --model llama-1b
device_pack
cat "$SUMMARY"
