#!/usr/bin/env bash
# Session 49, call 1 (nvidia-h100-x1; carry bundle-pack and .peers, a copy of ../shared/peers):
# issue 12's grid on an H100, the device its targets name, for the first time since session 21:
# llama-1b and gpt2 at batch 1/16/64/256, llama-1b in Q8_0/Q4_0/Q4_K, llama-8b at batch 1 in all
# four, the nano256 and seed000 workloads, and transformers' batch-1 decode on random checkpoints
# of the gpt2 and llama-1b shapes. Leaves the bundle in /tmp/new for the SmolLM2 call (3_smollm2).
set -uo pipefail
[[ -x bundle/roseinfer ]] || { mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz; }
mkdir -p /tmp/new && cp -r bundle /tmp/new/
source scripts/device_step.sh
device_begin /tmp/grid
BIN=$B/roseinfer
quant_args() {  # TYPE -> the --quantize words for it (none for bf16)
  [[ $1 == bf16 ]] || echo "--quantize $1"
}
for q in bf16 q4_k q8_0 q4_0; do
  # shellcheck disable=SC2046
  bench_with "$BIN" "llama1b_b1_$q" 1 --model llama-1b $(quant_args $q)
done
for q in bf16 q4_k q8_0 q4_0; do
  # shellcheck disable=SC2046
  bench_with "$BIN" "llama8b_b1_$q" 1 --model llama-8b $(quant_args $q)
done
for b in 1 16 64 256; do
  bench_with "$BIN" "gpt2_b${b}_bf16" "$b" --model gpt2
done
bench_with "$BIN" gpt2_b1_q4_k 1 --model gpt2 --quantize q4_k
for b in 256 64 16; do
  for q in bf16 q4_k q8_0 q4_0; do
    # shellcheck disable=SC2046
    bench_with "$BIN" "llama1b_b${b}_$q" "$b" --model llama-1b $(quant_args $q)
  done
done
step nano256_llama1b 150 "$BIN" bench --device cuda --mode offline --model llama-1b \
  --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
  --json "$OUT/nano256_llama1b.json"
bench_summary nano256_llama1b "$OUT/nano256_llama1b.json"
step seed000_gpt2 150 "$BIN" bench --device cuda --mode offline --model gpt2 \
  --dataset-name seed000 --json "$OUT/seed000_gpt2.json"
bench_summary seed000_gpt2 "$OUT/seed000_gpt2.json"
# Batch 1 again at the end of the call: the round-to-round noise of the cells that set targets.
for q in bf16 q4_k; do
  # shellcheck disable=SC2046
  bench_with "$BIN" "llama1b_b1_${q}_r2" 1 --model llama-1b $(quant_args $q)
done
bench_with "$BIN" gpt2_b1_bf16_r2 1 --model gpt2
peer_b1 llama1b gpt2
decode_step_table
device_pack
