#!/usr/bin/env bash
# Tensor parallel's all-reduce fused with the add-norm after it (issue 13), on nvidia-h200-x2
# (NCCL_NVLS_ENABLE=0 as that machine sets it), from the repository root with bundle-pack/
# carried (roseinfer, gpu_test_cuda_all_reduce, gpu_test_cuda_tensor_parallel):
#   - both GPU tests, and memcheck of the fused kernel's cases;
#   - llama-8b decode at batch 1, 16, 32 and 64, TP=1 and TP=2, TP=2 as built (fused up to 32
#     rows) and with the two kernels (ROSEINFER_CUDA_FUSED_ALL_REDUCE=0), ROUNDS rounds in turn;
#   - then, while time is left, llama-70b TP=2: batch 1 both ways, batch 16 and 64, and nano256.
# Each run's JSON, output and command land in $OUT/outputs.tgz; summary.txt has the table.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/tp_fused_out
DEADLINE=${DEADLINE:-480}
step gpu_test_cuda_all_reduce 120 "$B/gpu_test_cuda_all_reduce"
step gpu_test_cuda_tensor_parallel 300 "$B/gpu_test_cuda_tensor_parallel"
step memcheck_fused_add_norm 200 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
  "$B/gpu_test_cuda_all_reduce" -tc='*fused*'
RUN=(--mode offline --max-num-seqs 64 --max-num-batched-tokens 8192)
for round in $(seq 1 "${ROUNDS:-2}"); do
  for b in ${BATCHES:-1 16 32 64}; do
    G=(--model llama-8b --dataset-name "grid:$b:512:128" "${RUN[@]}")
    deadline_bench "llama8b_b${b}_tp1_r$round" -- "${G[@]}" --tensor-parallel 1
    deadline_bench "llama8b_b${b}_tp2_fused_r$round" -- "${G[@]}" --tensor-parallel 2
    deadline_bench "llama8b_b${b}_tp2_two_kernels_r$round" ROSEINFER_CUDA_FUSED_ALL_REDUCE=0 -- "${G[@]}" \
      --tensor-parallel 2
  done
done
deadline_bench llama8b_b1_tp2_no_collectives ROSEINFER_CUDA_SKIP=collective -- --model llama-8b \
  --dataset-name grid:1:512:128 --tensor-parallel 2 "${RUN[@]}"
for way in fused two_kernels; do
  env=()
  [[ $way == two_kernels ]] && env=(ROSEINFER_CUDA_FUSED_ALL_REDUCE=0)
  deadline_bench "llama70b_b1_tp2_$way" "${env[@]}" -- --model llama-70b --dataset-name grid:1:512:128 \
    --tensor-parallel 2 "${RUN[@]}"
done
for b in 16 64; do
  deadline_bench "llama70b_b${b}_tp2_fused" -- --model llama-70b --dataset-name "grid:$b:512:128" \
    --tensor-parallel 2 "${RUN[@]}"
done
if ((SECONDS <= DEADLINE)); then
  step llama70b_nano256_tp2_fused 240 "$B/roseinfer" bench --device cuda --mode offline \
    --model llama-70b --dataset-name nano256 --tensor-parallel 2 --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --json "$OUT/llama70b_nano256_tp2_fused.json"
fi
decode_step_table
device_pack
