#!/usr/bin/env bash
# Session 39 review: the backend reads its switches from switches_ (the members that only copied
# them are gone) and the peer all-reduce's four switches use the shared reader. On two H200s: the
# GPU tests that set switches or use the peer paths, one bench each at TP=1 and TP=2, and a
# malformed backend and peer switch refused with their names.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/review
for t in backend batch_invariance all_reduce tensor_parallel; do
  step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"
done
offline_bench llama1b_b64_q4_k 64 --model llama-1b --quantize q4_k
offline_bench llama1b_b1_bf16 1 --model llama-1b
step llama8b_tp2_b1 200 "$B/roseinfer" bench --device cuda --mode offline --tensor-parallel 2 \
  --dataset-name grid:1:512:128 --model llama-8b --json "$OUT/llama8b_tp2_b1.json"
bench_summary llama8b_tp2_b1 "$OUT/llama8b_tp2_b1.json"
for var in ROSEINFER_CUDA_SKIP=atention ROSEINFER_CUDA_PEER_PROBE=64 \
  ROSEINFER_CUDA_FUSED_ALL_REDUCE=x; do
  env "$var" "$B/roseinfer" bench --device cuda --mode offline --tensor-parallel 2 \
    --dataset-name grid:1:16:4 --model llama-1b >"$OUT/refuse_${var%%=*}.txt" 2>&1
  echo "$var: exit $? $(grep -m1 'error' "$OUT/refuse_${var%%=*}.txt")" | tee -a "$SUMMARY"
done
decode_step_table
device_pack
