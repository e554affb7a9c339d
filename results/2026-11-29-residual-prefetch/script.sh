#!/usr/bin/env bash
# The quantized GEMVs' residual-add element prefetched into L1 after the PDL wait (gemv_quant.cu:
# prefetch_first_residual), in one call (bundle-pack/ carried with roseinfer, roseinfer-base = the
# previous commit's build, and gpu_test_cuda_gemv_quant): that test and compute-sanitizer memcheck
# of its fused-norm and residual-add case, then batch-1 decode of llama-1b and llama-8b in Q4_K,
# base then new, ROUNDS rounds (default 2). $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/residual_prefetch
gpu_tests
step memcheck_quant_fused 200 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$B/gpu_test_cuda_gemv_quant" -tc="*fused norm input*"
for round in $(seq 1 "${ROUNDS:-2}"); do
  base_and_new_bench "llama-1b_q4k_r$round" 1 --model llama-1b --quantize q4_k
  base_and_new_bench "llama-8b_q4k_r$round" 1 --model llama-8b --max-model-len 4096 --quantize q4_k
done
device_pack
cat "$SUMMARY"
