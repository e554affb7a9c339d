#!/usr/bin/env bash
# Session 47, call 7 (nvidia-h200; carry bundle-pack): the GPU tests of the kept build, the backend's
# three times. Call 6's one failure was a test premise: the backend test that wants the decoded
# copy and the dense weights through the same cuBLAS calls now turns the dense tensor-core GEMV off.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/gemv-mma5
gpu_tests
step gpu_test_cuda_backend_2 300 "$B/gpu_test_cuda_backend"
step gpu_test_cuda_backend_3 300 "$B/gpu_test_cuda_backend"
device_pack
