#!/usr/bin/env bash
# Session 50 (nvidia-h200; carry bundle-pack with the one-GPU test executables, built from main's
# code at f966499): every GPU test that runs on one GPU and needs no cached model, while time is
# left (DEADLINE seconds into the call). The two-GPU tests (all-reduce, tensor parallel) and the
# real GGUF's (gpu_test_cuda_real_quantized) are not in the pack: the carry limit.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gputests
for t in "$B"/gpu_test_*; do
  [[ -x $t ]] || continue
  if ((SECONDS > ${DEADLINE:-540})); then
    echo "$(basename "$t"): skipped (past ${DEADLINE:-540}s)" | tee -a "$SUMMARY"
    continue
  fi
  step "$(basename "$t")" $((580 - SECONDS)) "$t"
  grep -h "test cases:" "$OUT/$(basename "$t").txt" | tail -n 1 | sed "s/^/$(basename "$t"): /" | tee -a "$SUMMARY"
done
device_pack
