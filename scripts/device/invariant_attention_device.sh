#!/usr/bin/env bash
# --batch-invariant with every step's attention on the tensor-core kernel (issue 10), on the GPU
# machine from the repository root with bundle-pack/ carried: GPU tests, then llama-1b and gpt2
# workloads by default, invariant with the split-KV attention of before
# (ROSEINFER_CUDA_INVARIANT_ATTENTION=split) and invariant with the tensor-core kernel, all from
# one binary, then the invariance study (every mode x cache x graphs, token ids compared) on
# llama-1b with the new path. Everything lands in $OUT/invariant.tgz; the figures are printed.
set -uo pipefail
FINAL=${OUT:-/tmp/inv_out}
OUT=/tmp/inv_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
for t in ${TESTS-batch_invariance engine backend prefill_attention}; do
  step "gpu_test_cuda_$t" 240 "$B/gpu_test_cuda_$t"
done
figures() {  # NAME JSON
  python3 - "$1" "$2" <<'PY' | tee -a "$OUT/figures.txt"
import json, sys
try:
    r = json.load(open(sys.argv[2]))["runs"][0]
except Exception as e:
    print(sys.argv[1], "no result", e); sys.exit()
print(sys.argv[1], "prefill_tok_s=%.0f decode_tok_s=%.0f output_tok_s=%.0f" % (
    r.get("prefill_throughput", 0), r.get("decode_throughput", 0), r["output_throughput"]))
PY
}
declare -A WORK=(
  [llama1b_b256]="--model llama-1b --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384"
  [llama1b_b1]="--model llama-1b --dataset-name grid:1:512:128"
  [nano256]="--model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384"
  [gpt2_b256]="--model gpt2 --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384"
)
for name in llama1b_b256 llama1b_b1 nano256 gpt2_b256; do
  for variant in default invariant_split invariant_tensor; do
    env=()
    extra=(--max-model-len 4096)
    [[ $name == gpt2* ]] && extra=(--max-model-len 1024)  # its learned positions end there
    [[ $variant != default ]] && extra+=(--batch-invariant)
    [[ $variant == invariant_split ]] && env=(ROSEINFER_CUDA_INVARIANT_ATTENTION=split)
    # shellcheck disable=SC2086
    step "${name}_$variant" 120 env "${env[@]}" "$B/roseinfer" bench ${WORK[$name]} --device cuda \
      --mode offline "${extra[@]}" --json "$OUT/${name}_$variant.json"
    figures "${name}_$variant" "$OUT/${name}_$variant.json"
  done
done
if [[ ${STUDY:-1} == 1 ]]; then
  step invariance_study 400 env OUT="$OUT/study" BIN="$B/roseinfer" MODEL=llama-1b \
    REQUESTS="${REQUESTS:-120}" bash scripts/invariance_study.sh
  cat "$OUT/study/invariance.md" 2>/dev/null | tail -40
fi
cat "$SUMMARY" "$OUT/figures.txt"
tar czf "$FINAL/invariant.tgz" -C "$OUT" .
