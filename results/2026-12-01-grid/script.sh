#!/usr/bin/env bash
# Session 43, call 3 (nvidia-h200, right after call 2 on the same machine, whose bundle/ and
# /tmp/base it reuses; carry bundle-pack and .peers, a copy of ../shared/peers): issue 12's grid at
# this session's final kernels in one call, and transformers beside it on random checkpoints of
# the gpt2 and llama-1b shapes. GRID_BIN names the binary in bundle/ (default roseinfer).
set -uo pipefail
[[ -x bundle/roseinfer ]] || { mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz; }
source scripts/device_step.sh
device_begin /tmp/grid
BIN=$B/${GRID_BIN:-roseinfer}
grid() {  # NAME BATCH ARGS...
  bench_with "$BIN" "$@"
}
# Batch 1 first (the main targets), then the larger batches, then the workloads.
for q in bf16 q4_k q8_0 q4_0; do
  extra=()
  [[ $q != bf16 ]] && extra=(--quantize $q)
  grid "llama1b_b1_$q" 1 --model llama-1b "${extra[@]}"
done
for q in bf16 q4_k q8_0; do
  extra=()
  [[ $q != bf16 ]] && extra=(--quantize $q)
  grid "llama8b_b1_$q" 1 --model llama-8b "${extra[@]}"
done
grid gpt2_b1_bf16 1 --model gpt2
grid gpt2_b1_q4_k 1 --model gpt2 --quantize q4_k
for b in 256 64 16; do
  for q in bf16 q4_k q8_0 q4_0; do
    extra=()
    [[ $q != bf16 ]] && extra=(--quantize $q)
    grid "llama1b_b${b}_$q" "$b" --model llama-1b "${extra[@]}"
  done
done
grid gpt2_b256_bf16 256 --model gpt2
step nano256_llama1b 150 "$BIN" bench --device cuda --mode offline --model llama-1b \
  --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
  --json "$OUT/nano256_llama1b.json"
bench_summary nano256_llama1b "$OUT/nano256_llama1b.json"
step seed000_gpt2 150 "$BIN" bench --device cuda --mode offline --model gpt2 \
  --dataset-name seed000 --json "$OUT/seed000_gpt2.json"
bench_summary seed000_gpt2 "$OUT/seed000_gpt2.json"
peer_b1 llama1b gpt2
decode_step_table
device_pack
