#!/usr/bin/env bash
# Session 42, call 10 (nvidia-h200): the step timeline (roseinfer configured with
# -DROSEINFER_TRACE_PROBE=ON, c87745c's sources) after x's quantization took two lanes a block:
# a traced batch-1 decode of llama-8b and llama-1b in Q4_K, and scripts/timeline.py over each
# trace (the raw traces are not kept: ~5 MB each). Compare results/2026-11-30-trace-probe/.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/x_sixteens_trace
for m in llama-8b llama-1b; do
  tag=${m//-/}
  offline_bench "${tag}_b1_q4_k_traced" 1 ROSEINFER_CUDA_TRACE_FILE=/tmp/trace_$tag.txt \
    --model $m --quantize q4_k
  step "timeline_$tag" 60 python3 scripts/timeline.py /tmp/trace_$tag.txt --all
done
decode_step_table
device_pack
