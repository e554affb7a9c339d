#!/usr/bin/env bash
# One measuring call ON the GPU machine (repo root, bundle/ carried): the GPU correctness tests
# first (a faster but wrong kernel must never pass unnoticed), then the grid bench on the backend,
# engine-level `roseinfer bench` figures, and ncu per-kernel times of single steps. Logs in $OUT;
# a short table last.
#   GPU_PERF_PARTS="tests memcheck bench pdl_off engine ncu"   what to run (pdl_off: the B=1 bench again
#   with ROSEINFER_CUDA_PDL=0);  NCU_CASES="gpt2_b1_eager ..."   which ncu cases (default: all)
set -uo pipefail
OUT=${OUT:-/tmp/gpu_perf}
mkdir -p "$OUT"
B=$PWD/bundle
export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
PARTS=${GPU_PERF_PARTS:-tests bench engine ncu}
want() { [[ " $PARTS " == *" $1 "* ]]; }
SUMMARY=()

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if want tests; then
  for t in gpu_test_cuda_kernels gpu_test_cuda_backend; do
    start=$SECONDS
    timeout 240 "$B/$t" >"$OUT/$t.log" 2>&1
    rc=$?
    SUMMARY+=("$(printf '%-28s rc=%s %ss  %s' "$t" "$rc" "$((SECONDS - start))" \
      "$(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/$t.log" | tr '\n' ' ')")")
    [[ $rc != 0 ]] && tail -n 40 "$OUT/$t.log"
  done
fi
if want memcheck && command -v compute-sanitizer >/dev/null; then
  start=$SECONDS
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/gpu_test_cuda_kernels" \
    -tc="paged attention*,gemv*,RoPE*" >"$OUT/memcheck.log" 2>&1
  rc=$?
  SUMMARY+=("$(printf '%-28s rc=%s %ss  %s' memcheck_kernels "$rc" "$((SECONDS - start))" \
    "$(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log")")")
  [[ $rc != 0 ]] && tail -n 30 "$OUT/memcheck.log"
fi
if want bench; then
  ROSEINFER_CUDA_STATS=1 ROSEINFER_BENCH_GRAPHS=${BENCH_GRAPHS:-on} \
    ROSEINFER_BENCH_BATCHES=${BENCH_BATCHES:-1,16,256} timeout 200 "$B/gpu_bench_cuda" \
    -tc="bench*" --no-skip >"$OUT/bench.log" 2>&1
  grep -E "^(model|gpt2|llama)|cuda stats" "$OUT/bench.log"
fi
if want pdl_off; then
  ROSEINFER_CUDA_PDL=0 ROSEINFER_BENCH_GRAPHS=on ROSEINFER_BENCH_BATCHES=1 timeout 120 \
    "$B/gpu_bench_cuda" -tc="bench*" --no-skip >"$OUT/bench_pdl_off.log" 2>&1
  echo "== PDL off"
  grep -E "^(gpt2|llama)" "$OUT/bench_pdl_off.log"
fi
if want engine; then
  for spec in gpt2:1 llama-1b:1 gpt2:256 llama-1b:256; do
    model=${spec%%:*} b=${spec##*:}
    ROSEINFER_CUDA_STATS=1 timeout 120 "$B/roseinfer" bench --model "$model" --device cuda \
      --dataset-name "grid:$b:512:128" --mode offline --max-num-seqs 256 \
      --max-num-batched-tokens 16384 >"$OUT/engine_${model}_$b.log" 2>&1
    echo "== engine $model B=$b rc=$?"
    grep -iE "prefill|decode|cuda stats" "$OUT/engine_${model}_$b.log" | head -n 8
  done
fi
if want ncu && command -v ncu >/dev/null; then
  ncu_run() {  # NAME, then env assignments for the bench
    local name=$1
    shift
    [[ -n ${NCU_CASES:-} && " $NCU_CASES " != *" $name "* ]] && return 0
    env "$@" ROSEINFER_BENCH_BATCHES=${NCU_BATCH:-1} timeout 150 ncu --profile-from-start off \
      --clock-control none --metrics gpu__time_duration.sum --csv ${NCU_EXTRA:-} \
      "$B/gpu_bench_cuda" -tc="bench*" --no-skip >"$OUT/ncu_$name.csv" 2>"$OUT/ncu_$name.err"
    python3 scripts/ncu_summary.py "$OUT/ncu_$name.csv" 14 || tail -n 5 "$OUT/ncu_$name.err"
  }
  for model in gpt2 llama-1b; do
    ncu_run "${model}_b1_eager" ROSEINFER_BENCH_MODELS=$model ROSEINFER_BENCH_GRAPHS=off \
      ROSEINFER_BENCH_PROFILE_STEP=8
    NCU_EXTRA="--graph-profiling graph" ncu_run "${model}_b1_graph" \
      ROSEINFER_BENCH_MODELS=$model ROSEINFER_BENCH_GRAPHS=on ROSEINFER_BENCH_PROFILE_STEP=8
  done
  NCU_BATCH=256 ncu_run llama_b256_eager ROSEINFER_BENCH_MODELS=llama-1b \
    ROSEINFER_BENCH_GRAPHS=off ROSEINFER_BENCH_PROFILE_STEP=8
  NCU_BATCH=16 ncu_run llama_prefill8192 ROSEINFER_BENCH_MODELS=llama-1b \
    ROSEINFER_BENCH_GRAPHS=off ROSEINFER_BENCH_PROFILE_PREFILL=1
fi
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
grep -E "^(gpt2|llama)" "$OUT/bench.log" 2>/dev/null
[[ -f "$OUT/bench_pdl_off.log" ]] && grep -E "^(gpt2|llama)" "$OUT/bench_pdl_off.log" | sed "s/$/  (PDL off)/"
exit 0
