#!/usr/bin/env bash
# Session 38 call 2: the GPU tests of the kernel-switch and shared-memory opt-in commits.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/call2
for t in gemv_quant kernels gemm_quant prefill_attention backend batch_invariance; do
  step "gpu_test_cuda_$t" 240 "$B/gpu_test_cuda_$t"
done
device_pack
