#!/usr/bin/env bash
# Session 53, call 6 on an nvidia-h200 (carry ["bundle-pack"]: roseinfer and gpu_test_cuda_backend of
# 87246d1, where CudaBackend::graph_variant calls workspace_plan.h's decode_graph_variant). A
# refactor: the backend test, and the two cells of the row limit's largest change against
# ../2026-12-03-cluster-rows-context/ (same figures expected).
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/graph_variant_check
step gpu_test_cuda_backend 300 "$B/gpu_test_cuda_backend"
dataset_bench "$B/roseinfer" llama1b_q4_k_b8_p4096_rowsdefault grid:8:4096:128 --model llama-1b --quantize q4_k
dataset_bench "$B/roseinfer" llama1b_q4_k_b8_p4096_rows8 grid:8:4096:128 \
  ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=8 --model llama-1b --quantize q4_k
decode_step_table
device_pack
