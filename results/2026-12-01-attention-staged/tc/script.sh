#!/usr/bin/env bash
# The tensor-core decode attention (ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=17: pure-decode steps of 17
# or more sequences on the mma kernel, a KV head's query heads packed in one tile) against the
# split-KV rows kernel (unset), one binary, one call. Repository root, bundle-pack/ carried.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/attention-tc
for round in 1 2; do
  for tc in "" 17; do
    tag=${tc:+tc}
    tag=${tag:-rows}
    v=ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=$tc
    offline_bench "r${round}_llama1b_b256_$tag" 256 $v --model llama-1b
    offline_bench "r${round}_llama1b_b64_$tag" 64 $v --model llama-1b
    if [[ $round == 1 ]]; then
      offline_bench "llama1b_b32_$tag" 32 $v --model llama-1b
      offline_bench "llama1b_b256_q4k_$tag" 256 $v --model llama-1b --quantize q4_k
      offline_bench "llama1b_b64_q4k_$tag" 64 $v --model llama-1b --quantize q4_k
      offline_bench "llama8b_b64_$tag" 64 $v --model llama-8b
      offline_bench "llama8b_b256_$tag" 256 $v --model llama-8b
      offline_bench "gpt2_b256_$tag" 256 $v --model gpt2
      step "nano256_llama1b_$tag" 150 env $v "$B/roseinfer" bench --device cuda --mode offline \
        --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
        --json "$OUT/nano256_llama1b_$tag.json"
      bench_summary "nano256_llama1b_$tag" "$OUT/nano256_llama1b_$tag.json"
    fi
  done
done
decode_step_table
device_pack
