#!/usr/bin/env bash
# A recheck of llama-1b `--quantize q4_0` batch-1 decode, the previous commit's build
# (bundle/roseinfer-base) against this one, alternated ROUNDS times (default 3), after one Q4_0
# round of scripts/direct_q4k_lean_device.sh measured -3.3% (bundle-pack/ carried; $OUT:
# summary.txt and outputs.tgz).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/q4_0_recheck
for round in $(seq 1 "${ROUNDS:-3}"); do
  base_and_new_bench "llama-1b_q4_0_r$round" 1 --model llama-1b --quantize q4_0
done
device_pack
cat "$SUMMARY"
