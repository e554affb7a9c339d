#!/usr/bin/env bash
# The cluster attention's merge through the owners' shared memory (issue 12), in one call
# (bundle-pack/ carried with roseinfer, roseinfer-base = the previous commit, optionally
# roseinfer-mid, and roseinfer-probe-old / -new = builds with the clock64 phase probe of
# results/2026-11-29-attention-inbox/ (phase_probe.cuh.txt, probe_patch.py) in the tensor-core
# attention kernel, experiment only): the GPU tests in the bundle, batch-1 decode base / mid / new
# (ROUNDS rounds, default 2) on the SmolLM2-135M shape, llama-1b bf16 and Q4_K, the SmolLM2 shape
# at batch 8, and each probe binary's per-phase cycles. $OUT: summary.txt, outputs.tgz.
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin /tmp/attention_inbox
gpu_tests
step make_smollm2_shape 120 python3 scripts/make_smollm2_shape.py /tmp/models
# roseinfer-mid (an intermediate form of the change), where carried, between base and new.
mid_bench() {  # NAME BATCH ARGS...
  [[ -x $B/roseinfer-mid ]] && bench_with "$B/roseinfer-mid" "$@"
  return 0
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in smollm2 llama-1b llama-1b_q4k; do
    args=(--model llama-1b)
    [[ $model == smollm2 ]] && args=(--model /tmp/models/smollm2-shape)
    [[ $model == llama-1b_q4k ]] && args+=(--quantize q4_k)
    base_offline_bench "${model}_r${round}_base" 1 "${args[@]}"
    mid_bench "${model}_r${round}_mid" 1 "${args[@]}"
    offline_bench "${model}_r${round}_new" 1 "${args[@]}"
  done
done
base_and_new_bench smollm2_b8 8 --model /tmp/models/smollm2-shape
# LLAMA8B=1: llama-8b --quantize q4_k once (head dim 128).
[[ ${LLAMA8B:-0} == 1 ]] && base_and_new_bench llama-8b_q4k 1 --model llama-8b --quantize q4_k
for which in ${PROBES:-old new}; do
  [[ -x $B/roseinfer-probe-$which ]] || continue
  for model in /tmp/models/smollm2-shape llama-1b; do
    name="probe_${which}_$(basename "$model")"
    bench_with "$B/roseinfer-probe-$which" "$name" 1 ROSEINFER_CUDA_PHASE_PROBE=1 --model "$model"
    grep phase_probe "$OUT/$name.txt" | sed "s/^/$name /" | tee -a "$SUMMARY"
  done
done
# EXTRA=1: the probe binary's attention with its RoPE angles not computed before the PDL wait
# (ROSEINFER_CUDA_ATTENTION_PROBE=3, which only the packed_posts/ probe build knew: outputs wrong,
# step time real), and roseinfer-mid where carried.
if [[ ${EXTRA:-0} == 1 ]]; then
  for model in /tmp/models/smollm2-shape llama-1b; do
    name="probe3_$(basename "$model")"
    bench_with "$B/roseinfer-probe-new" "$name" 1 ROSEINFER_CUDA_PHASE_PROBE=1 \
      ROSEINFER_CUDA_ATTENTION_PROBE=3 --model "$model"
    grep phase_probe "$OUT/$name.txt" | sed "s/^/$name /" | tee -a "$SUMMARY"
    [[ -x $B/roseinfer-mid ]] && bench_with "$B/roseinfer-mid" "mid_$(basename "$model")" 1 --model "$model"
  done
fi
device_pack
cat "$SUMMARY"
