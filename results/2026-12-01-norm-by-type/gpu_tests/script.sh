#!/usr/bin/env bash
# Session 43, call 13 (nvidia-h200): the backend and batch-invariance GPU tests at 474e71f's code
# (bundle-pack carried, made with ONLY="gpu_test_cuda_backend gpu_test_cuda_batch_invariance").
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && source scripts/device_step.sh &&
  device_begin /tmp/gputests &&
  step gpu_test_cuda_backend 280 "$B/gpu_test_cuda_backend" &&
  step gpu_test_cuda_batch_invariance 280 "$B/gpu_test_cuda_batch_invariance"
for t in backend batch_invariance; do tail -3 "$OUT/gpu_test_cuda_$t.txt"; done
cat "$OUT/summary.txt"
device_pack
