#!/usr/bin/env bash
# Tensor parallel on the GPU machine (issue 13), from the repository root with bundle-pack/
# carried. Every machine: the GPU tests in $TESTS (default: tensor_parallel). With 2+ GPUs
# (nvidia-h200-x2; NCCL_NVLS_ENABLE=0 as that machine sets it): NCCL all-reduce timings,
# llama-8b at --tensor-parallel 1 and 2 (grid B=1 and B=64: decode and prefill), the same TP=2
# B=1 step without its collectives (ROSEINFER_CUDA_SKIP=collective: what they cost in the graph),
# and llama-70b at TP=2 (grid B=1/16/64, nano256). With one GPU: the refusals instead (TP=2 on
# one GPU; llama-70b, which does not fit one). Everything lands in $OUT/tp.tgz; a table is printed.
set -uo pipefail
FINAL=${OUT:-/tmp/tp_out}
OUT=/tmp/tp_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/device_step.sh"
device_begin
NGPU=$(nvidia-smi -L | wc -l)
echo "GPUs: $NGPU; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}" | tee -a "$OUT/device.txt"
DEADLINE=${DEADLINE:-540}
for t in ${TESTS-tensor_parallel}; do step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"; done

bench() {  # NAME ENV-ASSIGNMENTS... -- ARGS...: one roseinfer bench, its JSON kept
  local name=$1
  shift
  local envs=()
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  if ((SECONDS > DEADLINE)); then echo "$name: skipped (past ${DEADLINE}s)" | tee -a "$SUMMARY"; return 0; fi
  step "$name" 200 env "${envs[@]}" "$B/roseinfer" bench --device cuda "$@" --json "$OUT/$name.json"
}
if ((NGPU >= 2)); then
  step collectives 120 "$B/gpu_bench_collectives" --no-skip
  cat "$OUT/collectives.txt" | grep -E "^ +[0-9]|all-reduce" | tee -a "$SUMMARY"
  G=(--max-num-seqs 64 --max-num-batched-tokens 8192 --mode offline)
  for tp in 1 2; do
    bench "llama8b_b1_tp$tp" -- --model llama-8b --dataset-name grid:1:512:128 --tensor-parallel "$tp" "${G[@]}"
    bench "llama8b_b64_tp$tp" -- --model llama-8b --dataset-name grid:64:512:128 --tensor-parallel "$tp" "${G[@]}"
  done
  bench llama8b_b1_tp2_no_collectives ROSEINFER_CUDA_SKIP=collective -- --model llama-8b \
    --dataset-name grid:1:512:128 --tensor-parallel 2 "${G[@]}"
  for b in 1 16 64; do
    bench "llama70b_b${b}_tp2" -- --model llama-70b --dataset-name "grid:$b:512:128" --tensor-parallel 2 "${G[@]}"
  done
  bench llama70b_nano256_tp2 -- --model llama-70b --dataset-name nano256 --tensor-parallel 2 \
    --max-num-seqs 256 --max-num-batched-tokens 16384 --mode offline
else
  step refuse_tp2_on_one_gpu 60 bash -c "! '$B/roseinfer' run datasets/sample.jsonl --model tiny --device cuda --tensor-parallel 2"
  step refuse_llama70b_on_one_gpu 120 bash -c "! '$B/roseinfer' run datasets/sample.jsonl --model llama-70b --device cuda"
  tail -n 3 "$OUT/refuse_tp2_on_one_gpu.txt" "$OUT/refuse_llama70b_on_one_gpu.txt" | tee -a "$SUMMARY"
fi
python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import glob, json, os, sys
out = sys.argv[1]
print("| run | device | decode tok/s | decode step ms | prefill tok/s | TPOT p50 ms | output tok/s |")
print("|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(f"{out}/*.json")):
    try:
        d = json.load(open(path))
        r = d["runs"][0]
    except Exception as e:
        print(f"| {os.path.basename(path)} | unreadable: {e} |"); continue
    steps = r.get("decode_steps") or 0
    step_ms = 1e3 * r.get("decode_time_s", 0) / steps if steps else float("nan")
    print(f"| {os.path.basename(path)[:-5]} | {d.get('device','?')} | {r.get('decode_throughput',0):.0f} | "
          f"{step_ms:.3f} | {r.get('prefill_throughput',0):.0f} | {r.get('p50_tpot_ms',0):.3f} | "
          f"{r.get('output_throughput',0):.0f} |")
PY
cat "$SUMMARY"
tar czf "$FINAL/tp.tgz" -C "$OUT" .
