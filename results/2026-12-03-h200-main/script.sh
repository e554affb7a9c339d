#!/usr/bin/env bash
# Session 51, six calls on one warm nvidia-h200. The bundle holds roseinfer (this session's build:
# llama-1b's qkv takes its norm in the one-wave GEMV at 1-4 rows, the MLP side keeps its add-norm
# kernel), roseinfer-base (main before it, 23a8580's engine) and two GPU tests. Call 0: the
# backend test (fused against unfused logits, bit for bit) and the batch-1/2/4 llama-1b steps,
# base against new; then issue 12's H200 grid (the last, results/2026-12-02-grid/, predates
# c84bc52 and session 48's cluster-row limits), spread over calls 0-4 while the real SmolLM2 GGUF
# travels in five parts; in call 5 the real GGUF's GPU test (its quantized logits against the CPU
# backend, greedy tokens on chat prompts), SmolLM2's decode both ways and transformers on the file.
#   call 0:    carry ["bundle-pack", ".peers"]   script.sh 0  (leaves the bundle in /tmp/new)
#   call K=1-4: carry [".model-partK"]           script.sh K  (stages part K in /tmp/rose-model)
#   call 5:    carry [".model-part5", ".device-extra"]  script.sh 5
set -uo pipefail
CALL=${1:?which call (0-5)}
if ((CALL == 0)); then
  mkdir -p bundle && tar xJf bundle-pack/bundle.tar.xz && mkdir -p /tmp/new && cp -r bundle /tmp/new/
else
  scripts/model_parts.sh stage "$CALL" >&2 || echo "stage $CALL failed" >&2
  mkdir -p bundle && cp /tmp/new/bundle/* bundle/
fi
source scripts/device_step.sh
device_begin "/tmp/call$CALL"
# llama-1b bf16 at 1, 2 and 4 rows: main's binary, this one, and this one with every norm a
# kernel of its own (ROSEINFER_CUDA_FUSED_NORM=0, the previous path in this binary), per ROUND.
ab_rounds() {  # ROUNDS...
  local round b
  for round in "$@"; do
    for b in 1 2 4; do
      bench_with "$B/roseinfer-base" "ab_llama1b_b${b}_base_r$round" "$b" --model llama-1b
      bench_with "$B/roseinfer" "ab_llama1b_b${b}_new_r$round" "$b" --model llama-1b
      bench_with "$B/roseinfer" "ab_llama1b_b${b}_unfused_r$round" "$b" \
        ROSEINFER_CUDA_FUSED_NORM=0 --model llama-1b
    done
  done
}
case $CALL in
  0)
    step gpu_test_cuda_backend 400 "$B/gpu_test_cuda_backend"
    ab_rounds 1 2
    grid_cells llama-1b 1 "bf16 q4_k q8_0 q4_0"
    grid_cells llama-8b 1 "bf16 q4_k q8_0 q4_0"
    grid_cells gpt2 1 "bf16 q4_k"
    peer_b1 llama1b gpt2
    ;;
  1) grid_cells llama-1b "16 64 256" "bf16 q4_k q8_0 q4_0" ;;
  2)
    grid_cells llama-8b "16 64 256" "bf16 q4_k"
    grid_cells gpt2 "16 64 256" bf16
    ;;
  3)
    step nano256_llama1b 150 "$B/roseinfer" bench --device cuda --mode offline --model llama-1b \
      --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 \
      --json "$OUT/nano256_llama1b.json"
    bench_summary nano256_llama1b "$OUT/nano256_llama1b.json"
    step seed000_gpt2 150 "$B/roseinfer" bench --device cuda --mode offline --model gpt2 \
      --dataset-name seed000 --json "$OUT/seed000_gpt2.json"
    bench_summary seed000_gpt2 "$OUT/seed000_gpt2.json"
    # The batch-1 cells that set targets again: the round-to-round noise.
    SUFFIX=_r2 grid_cells llama-1b 1 "bf16 q4_k"
    SUFFIX=_r2 grid_cells llama-8b 1 "bf16 q4_k"
    SUFFIX=_r2 grid_cells gpt2 1 bf16
    ab_rounds 3
    ;;
  4) ab_rounds 4 ;;
  5)
    MODEL=$(scripts/model_parts.sh join) || MODEL=""
    [[ -n $MODEL ]] || { echo "no model" | tee -a "$SUMMARY"; exit 1; }
    ROSEINFER_MODEL_CACHE=$(dirname "$MODEL") step gpu_test_cuda_real_quantized 300 \
      "$B/gpu_test_cuda_real_quantized" -s
    grep -E "greedy|agree|diverge|max_abs|tolerance" "$OUT/gpu_test_cuda_real_quantized.txt" |
      head -n 40 >"$OUT/real_quantized_lines.txt"
    for round in 1 2; do
      offline_bench "smollm2_b1_q4_1_r$round" 1 --model "$MODEL"
      offline_bench "smollm2_b1_bf16_r$round" 1 --model "$MODEL" --dtype bf16
    done
    offline_bench smollm2_b256_q4_1 256 --model "$MODEL"
    offline_bench smollm2_b256_bf16 256 --model "$MODEL" --dtype bf16
    if ls .device-extra/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .device-extra/*.whl && export PYTHONPATH=/tmp/site
    fi
    peer_decode_b1 smollm2 "$MODEL"
    ;;
esac
decode_step_table
device_pack
