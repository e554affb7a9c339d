#!/usr/bin/env bash
# Batch-invariance study (issue 10): the same prompts through `roseinfer run` in every scheduling
# mode x prefix-cache setting x CUDA-graph setting, with and without --batch-invariant, each run's
# token ids compared with the offline / cache on / graphs on run of the same setting.
#   OUT=dir BIN=path/to/roseinfer MODEL=llama-1b bash scripts/invariance_study.sh
# The KV pool is small (NUM_KV_BLOCKS) so long prompts preempt one another; prompts are
# scripts/invariance_study.py's workload (shared prefixes, skewed lengths up to ~2k tokens, half
# greedy, half seeded sampling). Writes OUT/invariance.md (one table per setting) and the runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/invariance}
BIN=${BIN:-build-cuda/roseinfer}
MODEL=${MODEL:-llama-1b}
DTYPES=${DTYPES:-bf16}
REQUESTS=${REQUESTS:-240}
NUM_KV_BLOCKS=${NUM_KV_BLOCKS:-600}
mkdir -p "$OUT"
python3 scripts/invariance_study.py make "$OUT/prompts.jsonl" --requests "$REQUESTS" --max-len 2048
: >"$OUT/invariance.md"
for dtype in $DTYPES; do
  for inv in "" --batch-invariant; do
    tag=${dtype}${inv:+-invariant}
    runs=()
    for mode in offline online naive; do
      for cache in "" --no-prefix-cache; do
        for graphs in "" --no-cuda-graph; do
          name="$tag-$mode${cache:+-nocache}${graphs:+-nographs}"
          cmd=("$BIN" run "$OUT/prompts.jsonl" --model "$MODEL" --device cuda --dtype "$dtype" \
            --mode "$mode" $cache $graphs $inv --num-kv-blocks "$NUM_KV_BLOCKS" \
            --max-num-batched-tokens 2048 -o "$OUT/$name.jsonl")
          echo "${cmd[*]}" >"$OUT/$name.cmd"
          "${cmd[@]}" >"$OUT/$name.txt" 2>&1 || echo "$name: exit $?" | tee -a "$OUT/invariance.md"
          runs+=("$OUT/$name.jsonl")
        done
      done
    done
    {
      echo
      echo "### $MODEL $dtype ${inv:-(default kernels)}: against $tag-offline"
      echo
      python3 scripts/invariance_study.py compare "${runs[0]}" "${runs[@]:1}" --markdown
    } >>"$OUT/invariance.md"
  done
done
cat "$OUT/invariance.md"
