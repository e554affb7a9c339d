#!/usr/bin/env bash
# cuBLASLt algorithms per row bucket (BucketedGemm) beside the previous build (bundle/roseinfer-base)
# on the H100: its GPU test, then seed000 as its baseline was measured (--mode all), the first
# step's host time (ROSEINFER_CUDA_STATS=2), and the prefill/decode grids and nano256 that run the
# GEMMs above 4 rows. Output in $OUT/buckets.tgz, summary printed last.
set -uo pipefail
FINAL=${OUT:-/tmp/buckets_out}
OUT=/tmp/buckets_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
for t in gemm_bucketed backend engine; do step "gpu_test_cuda_$t" 200 "$B/gpu_test_cuda_$t"; done
line() {  # NAME JSON: mode/cache durations and throughputs of one bench JSON
  python3 - "$1" "$2" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[2]))
except Exception as e:
    print(sys.argv[1], "no result", e); sys.exit()
print(sys.argv[1], " ".join("%s/%s: %.1f ms, prefill %.0f, decode %.0f, output %.0f tok/s" % (
    r["mode"], "cache" if r["prefix_cache"] else "nocache", 1e3 * r["duration"],
    r.get("prefill_throughput", 0), r.get("decode_throughput", 0), r["output_throughput"])
    for r in d["runs"]))
PY
}
for i in 1 2; do
  for bin in roseinfer-base roseinfer; do
    step "seed000_all_${bin}_$i" 120 "$B/$bin" bench --model gpt2 --device cuda \
      --dataset-name seed000 --mode all --both-cache-settings --json "$OUT/seed000_all_${bin}_$i.json"
    line "seed000_all_${bin}_$i" "$OUT/seed000_all_${bin}_$i.json"
  done
done
ROSEINFER_CUDA_STATS=2 "$B/roseinfer" bench --model gpt2 --device cuda --dataset-name seed000 \
  --mode offline 2>&1 | grep -E "cuda step (0|1):|bucketed gemm" | tee -a "$SUMMARY"
G=(--max-num-seqs 256 --max-num-batched-tokens 16384 --mode offline)
for spec in "llama-1b grid:256:512:128" "gpt2 grid:256:512:128" "llama-1b grid:16:512:128" \
  "llama-1b grid:64:512:128" "llama-1b nano256"; do
  set -- $spec
  for bin in roseinfer-base roseinfer; do
    name="${1}_${2//:/_}_$bin"
    step "$name" 150 "$B/$bin" bench --model "$1" --device cuda --dataset-name "$2" "${G[@]}" \
      --json "$OUT/$name.json"
    line "$name" "$OUT/$name.json"
  done
done
tar czf "$FINAL/buckets.tgz" -C "$OUT" .
cat "$SUMMARY"
