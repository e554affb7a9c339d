#!/usr/bin/env bash
# Session 38 call 9 (nvidia-h200-x2): the two-GPU tests on the kernel-switch commits' code
# (c47b1ff), then llama-8b batch 1 at TP=1 and TP=2, two rounds (scripts/device/tp_b1_device.sh).
set -uo pipefail
FINAL=$OUT
source scripts/device_step.sh
OUT=$FINAL/tests
device_begin "$OUT"
step gpu_test_cuda_all_reduce 90 "$B/gpu_test_cuda_all_reduce"
step gpu_test_cuda_tensor_parallel 150 "$B/gpu_test_cuda_tensor_parallel"
device_pack
OUT=$FINAL/tp TESTS=0 ROUNDS=2 DEADLINE=110 timeout 150 bash scripts/device/tp_b1_device.sh >/dev/null 2>&1
[[ -f $FINAL/tp/outputs.tgz ]] || (OUT=$FINAL/tp; SUMMARY=$OUT/summary.txt; device_pack)
