#!/usr/bin/env bash
# Session 43, call 12 (nvidia-h200-x2, NCCL_NVLS_ENABLE=0 as that machine sets it): tensor
# parallel's batch-1 step at this session's code (the bf16 kernels are session 42's), three rounds,
# then llama-8b at batch 64 and llama-70b at batch 1 at TP=2 while time is left.
set -uo pipefail
export OUT TESTS=0 ROUNDS=3 DEADLINE=110
bash scripts/device/tp_b1_device.sh
