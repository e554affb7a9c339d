#!/usr/bin/env bash
# Session 48, call 6 (nvidia-h200; carry bundle-pack): the committed rule (gpt2 6 rows, GQA models
# at least 512 KV features wide 8, narrower 16): the GPU tests that run the decode attention, gpt2
# at 7 rows (not measured before) on the rule and =16, and seed000 on gpt2 (issue 12's workload)
# on the rule and with ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 (before), twice each.
set -uo pipefail
source scripts/device_step.sh
device_begin /tmp/cluster-final
for t in gpu_test_cuda_kernels gpu_test_cuda_backend gpu_test_cuda_engine; do
  step "$t" 300 "$B/$t"
done
BIN=$B/roseinfer
bench_with "$BIN" gpt2_b7_rule 7 --model gpt2
bench_with "$BIN" gpt2_b7_16 7 ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16 --model gpt2
for round in 1 2; do
  for v in rule 16; do
    vars=()
    [[ $v == 16 ]] && vars=(ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS=16)
    step "r${round}_seed000_gpt2_$v" 150 env "${vars[@]}" "$BIN" bench --device cuda --mode offline \
      --model gpt2 --dataset-name seed000 --json "$OUT/r${round}_seed000_gpt2_$v.json"
    bench_summary "r${round}_seed000_gpt2_$v" "$OUT/r${round}_seed000_gpt2_$v.json"
  done
done
decode_step_table
device_pack
