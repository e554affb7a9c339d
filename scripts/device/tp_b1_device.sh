#!/usr/bin/env bash
# Tensor parallel's batch-1 step against one GPU's (issue 13), on nvidia-h200-x2 (NCCL_NVLS_ENABLE=0
# as that machine sets it), from the repository root with bundle-pack/ carried (roseinfer,
# gpu_test_cuda_all_reduce, gpu_test_cuda_tensor_parallel; roseinfer-base optional):
#   - TESTS=1 (default): both GPU tests, and memcheck of the peer kernels' cases;
#   - llama-8b, ROUNDS rounds in turn: batch 1 at TP=1 and TP=2 (and the base build's when the
#     bundle has one), and the probes PROBES names (words of comma-separated VAR=VALUE settings
#     and --bench-flags, each run at the degrees PROBE_TPS names, default "1 2": outputs wrong
#     where they skip kernels, step times real);
#   - MODELS_SMALL (default none): those models on one GPU at the batches SMALL_BATCHES names
#     (default "1 4"), the base build's (when bundled), as built and with each of SMALL_PROBES
#     (default PROBES);
#   - while time is left: llama-8b at the batches BATCHES_8B names (default 64) at TP=1 and TP=2
#     (and at TP=2 with each of BATCH_PROBES, default none),
#     llama-70b at TP=2 at BATCHES_70B (default 1), and with NANO_70B=1 llama-70b's nano256.
# Decode step = decode time / steps. Each run's JSON, output and command land in $OUT/outputs.tgz;
# summary.txt has the table.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/tp_b1_out
DEADLINE=${DEADLINE:-480}
if [[ ${TESTS:-1} == 1 ]]; then
  step gpu_test_cuda_all_reduce 120 "$B/gpu_test_cuda_all_reduce"
  step gpu_test_cuda_tensor_parallel 300 "$B/gpu_test_cuda_tensor_parallel"
  # The peer kernels' own cases under memcheck (API errors off: enabling peer access that is
  # already on returns an error the code expects and clears).
  step memcheck_peer_kernels 200 compute-sanitizer --tool memcheck --report-api-errors no \
    --error-exitcode 1 "$B/gpu_test_cuda_all_reduce" -tc='*fused*,*gather*'
fi
RUN=(--mode offline --max-num-seqs 64 --max-num-batched-tokens 8192)
B1=(--model llama-8b --dataset-name grid:1:512:128 "${RUN[@]}")
base_bench() {  # deadline_bench with the base build, when the bundle has one
  [[ -x $B/roseinfer-base ]] && BENCH_BIN=$B/roseinfer-base deadline_bench "$@"
  return 0
}
# A probe's words (comma-separated VAR=VALUE settings and --bench-flags) into envs and args, and
# a tag for the run names; "default" is no setting.
parse_probe() {  # PROBE
  envs=() args=()
  [[ $1 == default ]] && { tag=default; return; }
  IFS=, read -r -a words <<<"$1"
  for word in "${words[@]}"; do
    if [[ $word == --* ]]; then args+=("$word"); else envs+=("$word"); fi
  done
  tag=$(echo "$1" | tr -c 'a-zA-Z0-9\n' _ | tr '[:upper:]' '[:lower:]' | sed 's/roseinfer_cuda_//g; s/^_*//')
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for tp in 1 2; do
    base_bench "llama8b_b1_tp${tp}_base_r$round" -- "${B1[@]}" --tensor-parallel "$tp"
    deadline_bench "llama8b_b1_tp${tp}_r$round" -- "${B1[@]}" --tensor-parallel "$tp"
  done
  for probe in ${PROBES:-}; do
    parse_probe "$probe"
    for tp in ${PROBE_TPS:-1 2}; do
      deadline_bench "llama8b_b1_tp${tp}_${tag}_r$round" "${envs[@]}" -- "${B1[@]}" "${args[@]}" \
        --tensor-parallel "$tp"
    done
  done
done
# One GPU's smaller models (MODELS_SMALL, e.g. "llama-1b gpt2") at batches 1 and 4, as built and
# with each probe: what a kernel change does outside tensor parallel.
for m in ${MODELS_SMALL:-}; do
  for b in ${SMALL_BATCHES:-1 4}; do
    base_bench "${m}_b${b}_tp1_base" -- --model "$m" --dataset-name "grid:$b:512:128" "${RUN[@]}"
    for probe in default ${SMALL_PROBES:-${PROBES:-}}; do
      parse_probe "$probe"
      deadline_bench "${m}_b${b}_tp1_$tag" "${envs[@]}" -- --model "$m" \
        --dataset-name "grid:$b:512:128" "${RUN[@]}" "${args[@]}"
    done
  done
done
for b in ${BATCHES_8B:-64}; do
  for tp in 1 2; do
    deadline_bench "llama8b_b${b}_tp$tp" -- --model llama-8b --dataset-name "grid:$b:512:128" \
      "${RUN[@]}" --tensor-parallel "$tp"
  done
  for probe in ${BATCH_PROBES:-}; do  # at TP=2 only
    parse_probe "$probe"
    deadline_bench "llama8b_b${b}_tp2_$tag" "${envs[@]}" -- --model llama-8b \
      --dataset-name "grid:$b:512:128" "${RUN[@]}" "${args[@]}" --tensor-parallel 2
  done
done
for b in ${BATCHES_70B:-1}; do
  deadline_bench "llama70b_b${b}_tp2" -- --model llama-70b --dataset-name "grid:$b:512:128" \
    "${RUN[@]}" --tensor-parallel 2
done
if [[ ${NANO_70B:-0} == 1 ]] && ((SECONDS <= DEADLINE)); then
  step llama70b_nano256_tp2 240 "$B/roseinfer" bench --device cuda --mode offline \
    --model llama-70b --dataset-name nano256 --tensor-parallel 2 --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --json "$OUT/llama70b_nano256_tp2.json"
fi
decode_step_table
device_pack
