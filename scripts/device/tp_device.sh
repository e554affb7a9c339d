#!/usr/bin/env bash
# Tensor parallel on the GPU machine (issue 13), from the repository root with bundle-pack/
# carried. Every machine: the GPU tests in $TESTS (default: tensor_parallel). With 2+ GPUs
# (nvidia-h200-x2; NCCL_NVLS_ENABLE=0 as that machine sets it): NCCL all-reduce timings,
# llama-8b at --tensor-parallel 1 and 2 (grid B=1 and B=64: decode and prefill), the same TP=2
# B=1 step without its collectives (ROSEINFER_CUDA_SKIP=collective: what they cost in the graph)
# and with every all-reduce through NCCL (ROSEINFER_CUDA_PEER_ALL_REDUCE_BYTES=0),
# and llama-70b at TP=2 (grid B=1/16/64, nano256). With one GPU: the refusals instead (TP=2 on
# one GPU; llama-70b, which does not fit one). PHASES picks the 2-GPU parts (default: all):
# collectives bench8b equivalence bench70b; `equivalence` runs the invariance workload through
# `roseinfer run` on llama-1b and llama-8b at TP=1 and TP=2 (default and --batch-invariant; TP=2
# also online and without the prefix cache) and compares the token ids. Everything lands in
# $OUT/tp.tgz; a table is printed.
set -uo pipefail
FINAL=${OUT:-/tmp/tp_out}
OUT=/tmp/tp_work
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL"
# shellcheck source=scripts/device_step.sh
source "$(dirname "$0")/../device_step.sh"
device_begin
NGPU=$(nvidia-smi -L | wc -l)
echo "GPUs: $NGPU; NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}" | tee -a "$OUT/device.txt"
DEADLINE=${DEADLINE:-540}
for t in ${TESTS-tensor_parallel}; do step "gpu_test_cuda_$t" 300 "$B/gpu_test_cuda_$t"; done

PHASES=${PHASES:-collectives bench8b equivalence bench70b}
has_phase() { [[ " $PHASES " == *" $1 "* ]]; }
equivalence() {  # MODEL: TP=1 vs TP=2 token ids on the invariance workload
  local model=$1 dir="$OUT/equivalence_$1"
  mkdir -p "$dir"
  python3 scripts/invariance_study.py make "$dir/prompts.jsonl" --requests 60 --max-len 2048
  local -A runs=([tp1]="1" [tp2]="2" [tp1_inv]="1 --batch-invariant" [tp2_inv]="2 --batch-invariant"
    [tp2_inv_online]="2 --batch-invariant --mode online"
    [tp2_inv_nocache]="2 --batch-invariant --no-prefix-cache")
  for name in tp1 tp2 tp1_inv tp2_inv tp2_inv_online tp2_inv_nocache; do
    if ((SECONDS > DEADLINE)); then echo "$model $name: skipped (past ${DEADLINE}s)" | tee -a "$SUMMARY"; continue; fi
    # shellcheck disable=SC2086 # the table's values are argument lists
    step "${model}_$name" 150 "$B/roseinfer" run "$dir/prompts.jsonl" --model "$model" --device cuda \
      --num-kv-blocks 600 --max-num-batched-tokens 2048 --tensor-parallel ${runs[$name]} -o "$dir/$name.jsonl"
  done
  {
    echo "### $model: TP=2 against TP=1 (default kernels)"
    python3 scripts/invariance_study.py compare "$dir/tp1.jsonl" "$dir/tp2.jsonl" --markdown
    echo "### $model --batch-invariant: TP=2 against TP=1"
    python3 scripts/invariance_study.py compare "$dir/tp1_inv.jsonl" "$dir/tp2_inv.jsonl" --markdown
    echo "### $model --batch-invariant TP=2: online and without the prefix cache, against offline"
    python3 scripts/invariance_study.py compare "$dir/tp2_inv.jsonl" "$dir/tp2_inv_online.jsonl" \
      "$dir/tp2_inv_nocache.jsonl" --markdown
  } 2>&1 | tee -a "$OUT/equivalence.md" "$SUMMARY"
}
if ((NGPU >= 2)); then
  if has_phase collectives; then
    step collectives 120 "$B/gpu_bench_collectives" --no-skip
    grep -E "^ +[0-9]|all-reduce" "$OUT/collectives.txt" | tee -a "$SUMMARY"
  fi
  G=(--max-num-seqs 64 --max-num-batched-tokens 8192 --mode offline)
  if has_phase bench8b; then
    for tp in 1 2; do
      deadline_bench "llama8b_b1_tp$tp" -- --model llama-8b --dataset-name grid:1:512:128 --tensor-parallel "$tp" "${G[@]}"
      deadline_bench "llama8b_b64_tp$tp" -- --model llama-8b --dataset-name grid:64:512:128 --tensor-parallel "$tp" "${G[@]}"
    done
    deadline_bench llama8b_b1_tp2_no_collectives ROSEINFER_CUDA_SKIP=collective -- --model llama-8b \
      --dataset-name grid:1:512:128 --tensor-parallel 2 "${G[@]}"
    # Every all-reduce through NCCL (the peer-memory one-shot off): what the one-shot saves.
    for b in 1 64; do
      deadline_bench "llama8b_b${b}_tp2_nccl_only" ROSEINFER_CUDA_PEER_ALL_REDUCE_BYTES=0 -- --model llama-8b \
        --dataset-name "grid:$b:512:128" --tensor-parallel 2 "${G[@]}"
    done
  fi
  if has_phase equivalence; then
    for model in llama-1b llama-8b; do equivalence "$model"; done
  fi
  if has_phase bench70b; then
    for b in 1 16 64; do
      deadline_bench "llama70b_b${b}_tp2" -- --model llama-70b --dataset-name "grid:$b:512:128" --tensor-parallel 2 "${G[@]}"
    done
    deadline_bench llama70b_b1_tp2_nccl_only ROSEINFER_CUDA_PEER_ALL_REDUCE_BYTES=0 -- --model llama-70b \
      --dataset-name grid:1:512:128 --tensor-parallel 2 "${G[@]}"
    deadline_bench llama70b_nano256_tp2 -- --model llama-70b --dataset-name nano256 --tensor-parallel 2 \
      --max-num-seqs 256 --max-num-batched-tokens 16384 --mode offline
  fi
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
