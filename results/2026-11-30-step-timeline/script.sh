#!/usr/bin/env bash
# Session 40, call 3: the graphed batch-1 decode step as a timeline. roseinfer built with
# experiment.diff (kernels/cuda/trace_probe.cuh): thread 0 of every block of the quantized GEMV,
# the cluster attention, the add-norm and the sampling kernel stamps %globaltimer at entry, PDL
# wait return, input ready and exit; ROSEINFER_CUDA_TRACE_FILE dumps the last 65,536 blocks of
# each kernel family at exit. timeline.py reads them.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/timeline
for m in "llama8b_q4_k --model llama-8b --quantize q4_k" "llama1b_q4_k --model llama-1b --quantize q4_k" \
  "llama8b_bf16 --model llama-8b" "llama1b_bf16 --model llama-1b"; do
  set -- $m
  name=$1
  shift
  offline_bench "${name}_b1_traced" 1 ROSEINFER_CUDA_TRACE_FILE=$OUT/trace_$name.txt "$@"
  gzip -f "$OUT/trace_$name.txt"
done
decode_step_table
device_pack
