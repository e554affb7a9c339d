#!/usr/bin/env bash
# Session 40, call 4: the traced build of call 3 (experiment.diff), batch-1 Q4_K with the GEMV's
# first weight loads before its PDL wait (ROSEINFER_CUDA_GEMV_QUANT_EARLY=1, the default) and
# after it (0): does the x preparation wait behind the weight loads in flight?
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/timeline_early
for round in 1 2; do
  for early in 1 0; do
    for m in "llama8b --model llama-8b" "llama1b --model llama-1b"; do
      set -- $m
      name=$1
      shift
      offline_bench "${name}_q4_k_early${early}_r$round" 1 ROSEINFER_CUDA_GEMV_QUANT_EARLY=$early \
        ROSEINFER_CUDA_TRACE_FILE=$OUT/trace_${name}_early${early}_r$round.txt "$@" --quantize q4_k
      gzip -f "$OUT/trace_${name}_early${early}_r$round.txt"
    done
  done
done
decode_step_table
device_pack
