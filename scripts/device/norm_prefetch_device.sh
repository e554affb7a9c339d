#!/usr/bin/env bash
# The quantized GEMVs' norm weight prefetched into L1 before the PDL wait (norm_row.cuh:
# prefetch_norm_weight), in one call (bundle-pack/ carried with roseinfer, roseinfer-base = the
# previous commit's build, and GPU test programs): every GPU test program in the bundle and
# compute-sanitizer memcheck of the fused-norm GEMV tests, then batch-1 decode of the SmolLM2-135M
# shape, gpt2 and llama-1b in bf16, llama-1b and llama-8b in Q4_K, base then new, ROUNDS rounds
# (default 2), and llama-1b Q4_K at batch 8. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/norm_prefetch
gpu_tests
step memcheck_dense_fused_norm 200 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$B/gpu_test_cuda_kernels" -tc="gemv with the norm fused in*"
step memcheck_quant_fused_norm 200 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$B/gpu_test_cuda_gemv_quant" -tc="*fused norm input*"
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
model_args() {  # MODEL: the bench arguments of one of the models below
  case $1 in
    smollm2) echo --model /tmp/models/smollm2-shape ;;
    llama-1b_q4k) echo --model llama-1b --quantize q4_k ;;
    llama-8b_q4k) echo --model llama-8b --max-model-len 4096 --quantize q4_k ;;
    *) echo --model "$1" ;;
  esac
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in smollm2 gpt2 llama-1b llama-1b_q4k llama-8b_q4k; do
    read -r -a args <<<"$(model_args "$model")"
    base_and_new_bench "${model}_r$round" 1 "${args[@]}"
  done
done
read -r -a args <<<"$(model_args llama-1b_q4k)"
base_and_new_bench llama-1b_q4k_b8 8 "${args[@]}"
device_pack
cat "$SUMMARY"
