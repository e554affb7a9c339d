#!/usr/bin/env bash
# Session 43, call 11 (nvidia-h200; call 10 carried roseinfer-base, 6e0d82c, alone into /tmp/base):
# the kept code (Q4_0 alone on the one-row norm path's sixteen a thread, the path split into
# norm_quantize_one_row_eights / _sixteens; ptxas -v identical to the unsplit version for all 358
# gemv_quant kernels). The GEMV test, then base against new at batch 1 on llama-1b and llama-8b:
# Q4_0 (changed), Q8_0 and Q4_K (the same kernels as the base).
set -uo pipefail
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
source scripts/device_step.sh
device_begin /tmp/norm_by_type_final
step gpu_test_cuda_gemv_quant 300 "$B/gpu_test_cuda_gemv_quant"
for m in llama-1b llama-8b; do
  tag=${m//-/}
  for q in q4_0 q8_0 q4_k; do
    base_and_new_bench "${tag}_b1_$q" 1 --model $m --quantize $q
  done
done
decode_step_table
device_pack
