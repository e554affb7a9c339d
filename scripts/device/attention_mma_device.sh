#!/usr/bin/env bash
# The tensor-core cluster decode attention against the scalar one it replaces (one binary:
# ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0 runs the scalar kernel), on the H100 with bundle-pack/
# carried (roseinfer, gpu_test_cuda_kernels): the kernel tests, memcheck and racecheck of the
# attention cases, batch-1/2/4 offline benches of gpt2, llama-1b and llama-8b in bf16 and Q4_K
# (ROUNDS rounds, alternating), and ncu's duration of one step's attention launches.
# $OUT gets summary.txt and outputs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/attention_mma}
mkdir -p "$OUT"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
step gpu_test_cuda_kernels 300 "$B/gpu_test_cuda_kernels"
step memcheck_attention 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
  "$B/gpu_test_cuda_kernels" -tc="*attention*"
step racecheck_cluster 300 compute-sanitizer --tool racecheck --error-exitcode 1 \
  "$B/gpu_test_cuda_kernels" -tc="*cluster decode*"
bench_pair() {  # NAME BATCH ARGS...: the offline bench with the tensor-core and the scalar kernel
  local name=$1 batch=$2
  shift 2
  offline_bench "${name}_mma" "$batch" "$@"
  offline_bench "${name}_scalar" "$batch" ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0 "$@"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  bench_pair "r${round}_gpt2_b1" 1 --model gpt2
  bench_pair "r${round}_llama-1b_b1" 1 --model llama-1b
  bench_pair "r${round}_llama-1b_q4k_b1" 1 --model llama-1b --quantize q4_k
  bench_pair "r${round}_llama-8b_b1" 1 --model llama-8b
  bench_pair "r${round}_llama-8b_q4k_b1" 1 --model llama-8b --quantize q4_k
  bench_pair "r${round}_llama-1b_b2" 2 --model llama-1b
  bench_pair "r${round}_llama-1b_b4" 4 --model llama-1b
done
for model in llama-8b llama-1b gpt2; do
  for kernel in mma scalar; do
    mma=1
    [[ $kernel == scalar ]] && mma=0
    step "ncu_${model}_$kernel" 300 env ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=$mma ncu \
      --clock-control none --csv --page details --metrics gpu__time_duration.sum \
      -k regex:cluster_decode --launch-skip 200 --launch-count 20 "$B/roseinfer" bench --device cuda \
      --mode offline --dataset-name grid:1:512:128 --model "$model" --no-cuda-graph
    grep '^"' "$OUT/ncu_${model}_$kernel.txt" >"$OUT/ncu_${model}_$kernel.csv"
    python3 scripts/ncu_summary.py "$OUT/ncu_${model}_$kernel.csv" 3 | tee -a "$SUMMARY"
  done
done
# Where the tensor-core kernel's time goes: ncu's full set and per-instruction stall samples.
for model in ${PROFILE_MODELS:-}; do
  step "ncu_full_$model" 300 ncu --clock-control none --set full --import-source yes \
    -k regex:cluster_decode --launch-skip 200 --launch-count 1 -o "$OUT/full_$model" \
    "$B/roseinfer" bench --device cuda --mode offline --dataset-name grid:1:512:128 \
    --model "$model" --no-cuda-graph
  step "ncu_source_$model" 60 ncu -i "$OUT/full_$model.ncu-rep" --page source --csv \
    --print-source sass
  rm -f "$OUT/full_$model.ncu-rep"
done
device_pack
cat "$SUMMARY"
