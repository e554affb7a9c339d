#!/usr/bin/env bash
# The int8 GEMV's fold with the magic-constant conversion (one FADD per output and sub-block
# instead of an I2F) against the build before it (roseinfer-base, a38e812), issue 12, on the GPU
# machine from the repository root with bundle-pack/ carried (roseinfer, roseinfer-base,
# gpu_test_cuda_gemv_quant, gpu_test_cuda_backend, gpu_bench_gemv_quant_mma): the tests, the
# per-product timings, the token ids of 32 greedy requests at 20 and 32 rows a step on both builds
# (llama-1b --quantize q4_k: the conversion is exact, so they must match), then llama-1b and
# llama-8b `--quantize q4_k` decode at 8-32 rows on both builds and bf16 at 24 and 32 (one round,
# grid:B:512:128).
set -uo pipefail
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin /tmp/mma_magic_out
for t in gpu_test_cuda_gemv_quant gpu_test_cuda_backend; do
  step "$t" 300 "$B/$t"
done
step bench_mma 120 "$B/gpu_bench_gemv_quant_mma" --no-skip
grep -A5 "one layer" "$OUT/bench_mma.txt" | tee -a "$SUMMARY"
python3 -c "
import json
for i in range(32): print(json.dumps({'id': f'p{i}', 'prompt': f'Request {i}: tell me about the number {i * 7}.'}))
" >"$OUT/prompts32.jsonl"
for seqs in 20 32; do
  for bin in roseinfer roseinfer-base; do
    step "tokens_${bin}_$seqs" 120 "$B/$bin" run "$OUT/prompts32.jsonl" --device cuda \
      --model llama-1b --quantize q4_k --max-tokens 64 --ignore-eos --max-num-seqs "$seqs" \
      -o "$OUT/tokens_${bin}_$seqs.jsonl"
  done
  python3 - "$OUT/tokens_roseinfer_$seqs.jsonl" "$OUT/tokens_roseinfer-base_$seqs.jsonl" "$seqs" <<'PY' | tee -a "$SUMMARY"
import json, sys
ids = [{json.loads(l)["id"]: json.loads(l)["token_ids"] for l in open(p)} for p in sys.argv[1:3]]
same = sum(ids[0][k] == ids[1].get(k) for k in ids[0])
distinct = len({tuple(v) for v in ids[0].values()})
print(f"tokens at {sys.argv[3]} seqs: {same} of {len(ids[0])} requests identical ({distinct} distinct sequences)")
PY
done
for model in llama-1b llama-8b; do
  for b in 8 16 20 24 28 32; do
    base_and_new_bench "${model//-/}_b${b}_q4_k" "$b" --model "$model" --quantize q4_k
  done
  for b in 24 32; do
    offline_bench "${model//-/}_b${b}_bf16" "$b" --model "$model"
  done
done
device_pack
