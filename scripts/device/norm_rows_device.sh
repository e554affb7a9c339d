#!/usr/bin/env bash
# The add-norm kernel with every load before its first store, beside the previous commit's binary
# (bundle/roseinfer-base), and the tensor-core cluster attention for 8 and 16 rows
# (ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 against the default 4), on the H100 with
# bundle-pack/ carried (roseinfer, roseinfer-base and the GPU tests named in TESTS).
# $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/norm_rows}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
for t in ${TESTS:-kernels backend batch_invariance engine}; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
step memcheck_norm 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$B/gpu_test_cuda_kernels" -tc="*norm*"
base_pair() {  # NAME BATCH ARGS...: the offline bench on this binary and on roseinfer-base
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_new" "$batch" "$@"
  base_offline_bench "${name}_base" "$batch" "$@"
}
for round in 1 2; do
  base_pair "r${round}_gpt2_b1" 1 --model gpt2
  base_pair "r${round}_llama-1b_b1" 1 --model llama-1b
  base_pair "r${round}_llama-1b_q4k_b1" 1 --model llama-1b --quantize q4_k
  base_pair "r${round}_llama-8b_b1" 1 --model llama-8b
  base_pair "r${round}_llama-8b_q4k_b1" 1 --model llama-8b --quantize q4_k
done
base_pair llama-1b_b256 256 --model llama-1b
for batch in 8 16; do
  for rows in 4 16; do
    offline_bench "llama-1b_b${batch}_rows$rows" "$batch" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=$rows --model llama-1b
    offline_bench "llama-8b_q4k_b${batch}_rows$rows" "$batch" ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=$rows --model llama-8b --quantize q4_k
  done
done
device_pack
cat "$SUMMARY"
