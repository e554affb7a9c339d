#!/usr/bin/env bash
# Session 41, call 9 (nvidia-h200): the step timeline probe as a build option (roseinfer configured
# with -DROSEINFER_TRACE_PROBE=ON): a traced batch-1 decode of llama-8b and llama-1b in Q4_K, and
# scripts/timeline.py over each trace (the raw traces are not kept: ~5 MB each).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/trace_probe
for m in llama-8b llama-1b; do
  tag=${m//-/}
  offline_bench "${tag}_b1_q4_k_traced" 1 ROSEINFER_CUDA_TRACE_FILE=/tmp/trace_$tag.txt \
    --model $m --quantize q4_k
  step "timeline_$tag" 60 python3 scripts/timeline.py /tmp/trace_$tag.txt --all
  wc -l /tmp/trace_$tag.txt | tee -a "$SUMMARY"
done
decode_step_table
device_pack
