#!/usr/bin/env bash
# Session 41, call 5 (nvidia-h200-x2; call 4 carried roseinfer-base alone): the session's GEMVs against the ones it started from, in one
# call. roseinfer = a732c84 (2a839a8's kernels: evict_first for both GEMVs' weight loads);
# roseinfer-base = the same tree with kernels/cuda/gemv.cu and gemv_quant.cu as of f63369e (plain
# weight loads; --version says a732c84-dirty).
#   single/: batch-1 decode on GPU 0, base then new, two rounds;
#   tp/: llama-8b batch 1 at TP=1 and TP=2, base and new (scripts/device/tp_b1_device.sh).
set -uo pipefail
FINAL=$OUT
source scripts/device_step.sh
OUT=$FINAL/single
# The base binary came in a call of its own (the carry limit), unpacked there into /tmp/base.
mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && cp /tmp/base/bundle/roseinfer-base bundle/
device_begin "$OUT"
for round in 1 2; do
  for m in llama-8b llama-1b gpt2; do
    tag=${m//-/}
    base_offline_bench "${tag}_b1_bf16_base_r$round" 1 --model $m
    offline_bench "${tag}_b1_bf16_new_r$round" 1 --model $m
  done
  for m in llama-8b llama-1b; do
    tag=${m//-/}
    base_offline_bench "${tag}_b1_q4_k_base_r$round" 1 --model $m --quantize q4_k
    offline_bench "${tag}_b1_q4_k_new_r$round" 1 --model $m --quantize q4_k
  done
done
decode_step_table
device_pack
OUT=$FINAL/tp TESTS=0 ROUNDS=2 DEADLINE=1 timeout 150 bash scripts/device/tp_b1_device.sh >/dev/null 2>&1
[[ -f $FINAL/tp/outputs.tgz ]] || (OUT=$FINAL/tp; SUMMARY=$OUT/summary.txt; device_pack)
