# Sourced by the device scripts (session_device.sh, issue10_device.sh, issue12_device.sh). step
# runs one named step with a time limit, its output in $OUT/NAME.txt and its command in
# $OUT/NAME.cmd, and a PASS / SKIP (exit 77) / FAIL line appended to $SUMMARY and printed, with the
# output's tail on failure. Never fails itself, so one broken step does not stop the call.
step() {  # NAME LIMIT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  echo "$*" >"$OUT/$name.cmd"
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.txt" 2>&1
  local rc=$?
  local status=PASS
  [[ $rc == 77 ]] && status=SKIP
  [[ $rc != 0 && $rc != 77 ]] && status="FAIL(rc=$rc)"
  printf '%-40s %-12s %4ss\n' "$name" "$status" "$((SECONDS - start))" | tee -a "$SUMMARY"
  [[ $status == FAIL* ]] && tail -n 25 "$OUT/$name.txt"
  return 0
}

# Every GPU test program in the bundle ($B/gpu_test_*) as a step of its own, 300 s each.
gpu_tests() {
  local t
  for t in "$B"/gpu_test_*; do
    [[ -x $t ]] && step "$(basename "$t")" 300 "$t"
  done
  return 0
}

# The start every such script shares: with DEFAULT_OUT given, $OUT defaults to it and is made
# (else $OUT must exist); unpack the carried bundle unless bundle/ is there, set B (the bundle) and
# LD_LIBRARY_PATH, start an empty $SUMMARY, and record the device, driver and the bundle's
# binaries' versions in $OUT/device.txt.
device_begin() {  # [DEFAULT_OUT]
  if [[ $# -gt 0 ]]; then
    OUT=${OUT:-$1}
    mkdir -p "$OUT"
  fi
  if [[ ! -x bundle/roseinfer && -f bundle-pack/bundle.tar.xz ]]; then tar xJf bundle-pack/bundle.tar.xz; fi
  B=$PWD/bundle
  export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  SUMMARY="$OUT/summary.txt"
  : >"$SUMMARY"
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    for bin in "$B/roseinfer" "$B/roseinfer-base"; do [[ -x $bin ]] && "$bin" --version; done
  } | tee "$OUT/device.txt"
}

# One summary line per run of a `roseinfer bench --json` result: NAME, decode and prefill tok/s,
# TPOT and TTFT p50, and the weight types that ran; "no result" when the file is missing or
# broken (the step's own line already says FAIL then).
bench_summary() {  # NAME JSON
  python3 - "$2" "$1" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "no result", e); sys.exit()
for r in d.get("runs", []):
    m = r.get("metrics", r)
    print(sys.argv[2], "decode_tok_s=%.0f prefill_tok_s=%.0f tpot_p50_ms=%.3f ttft_p50_ms=%.1f" % (
        m.get("decode_throughput", 0), m.get("prefill_throughput", 0), m.get("p50_tpot_ms", 0),
        m.get("p50_ttft_ms", 0)), d.get("config", {}).get("weights", "?"))
PY
}

# One `roseinfer bench --mode offline` of BATCH sequences x 512 prompt / 128 output tokens
# (grid:BATCH:512:128) as step NAME, then its bench_summary line. Leading VAR=VALUE words are the
# run's environment; the rest are bench arguments (the model, --max-model-len, --quantize ...).
# base_offline_bench runs the same with the bundle's roseinfer-base (the previous commit's build).
offline_bench() {  # NAME BATCH [VAR=VALUE...] ARGS...
  bench_with "$B/roseinfer" "$@"
}
base_offline_bench() {  # NAME BATCH [VAR=VALUE...] ARGS...
  bench_with "$B/roseinfer-base" "$@"
}
# The previous commit's build, then this one, on the same bench: NAME_base and NAME_new.
base_and_new_bench() {  # NAME BATCH [VAR=VALUE...] ARGS...
  local name=$1
  shift
  base_offline_bench "${name}_base" "$@"
  offline_bench "${name}_new" "$@"
}
# For each row count in BATCHES: MODEL in bf16, then `--quantize q4_k` on the previous build and
# this one (NAME_b{B}_bf16, NAME_b{B}_q4_k_base, NAME_b{B}_q4_k_new; NAME is MODEL without '-').
q4k_rows_bench() {  # MODEL "BATCHES"
  local model=$1 b tag
  for b in $2; do
    tag="${model//-/}_b$b"
    offline_bench "${tag}_bf16" "$b" --model "$model"
    base_and_new_bench "${tag}_q4_k" "$b" --model "$model" --quantize q4_k
  done
}
bench_with() {  # BINARY NAME BATCH [VAR=VALUE...] ARGS...
  local bin=$1 name=$2 batch=$3
  shift 3
  dataset_bench "$bin" "$name" "grid:$batch:512:128" "$@"
}
# bench_with on any --dataset-name (e.g. grid:1:2048:128 for longer prompts).
dataset_bench() {  # BINARY NAME DATASET [VAR=VALUE...] ARGS...
  local bin=$1 name=$2 dataset=$3
  shift 3
  local vars=()
  while [[ $# -gt 0 && $1 == [A-Z]*=* ]]; do
    vars+=("$1")
    shift
  done
  step "$name" 150 env "${vars[@]}" "$bin" bench --device cuda --mode offline \
    --max-num-seqs 256 --max-num-batched-tokens 16384 --dataset-name "$dataset" "$@" \
    --json "$OUT/$name.json"
  bench_summary "$name" "$OUT/$name.json"
}

# A rule against one forced setting: dataset_bench of $B/roseinfer with VAR=VALUE in its
# environment, or without it when VALUE is "default".
switch_bench() {  # NAME VAR VALUE DATASET ARGS...
  local name=$1 var=$2 value=$3 dataset=$4
  shift 4
  local env_args=()
  [[ $value == default ]] || env_args=("$var=$value")
  dataset_bench "$B/roseinfer" "$name" "$dataset" "${env_args[@]}" "$@"
}

# For each CELL "TAG BATCH PROMPT OTHER ARGS...", switch_bench on grid:BATCH:PROMPT:128 by default,
# then with VAR=OTHER: steps TAG_bBATCH_pPROMPT_LABEL{default,OTHER}SUFFIX, e.g. switch_cells
# ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS rows _r1 "llama1b 8 2048 4 --model llama-1b" runs
# llama1b_b8_p2048_rowsdefault_r1 and llama1b_b8_p2048_rows4_r1.
switch_cells() {  # VAR LABEL SUFFIX CELL...
  local var=$1 label=$2 suffix=$3 cell tag b p other args value
  shift 3
  for cell in "$@"; do
    read -r tag b p other args <<<"$cell"
    for value in default "$other"; do
      # shellcheck disable=SC2086
      switch_bench "${tag}_b${b}_p${p}_$label$value$suffix" "$var" "$value" "grid:$b:$p:128" $args
    done
  done
}

# One bench_with of $B/roseinfer for each batch in BATCHES and weight type in TYPES (bf16, or a
# --quantize type): step MODEL_bB_TYPE (MODEL without '-'), e.g. grid_cells llama-1b "1 16" "bf16
# q4_k" runs llama1b_b1_bf16, llama1b_b1_q4_k, llama1b_b16_bf16 and llama1b_b16_q4_k. SUFFIX, when
# set, ends every step name (a second round: SUFFIX=_r2).
grid_cells() {  # MODEL "BATCHES" "TYPES"
  local model=$1 b q quant
  for b in $2; do
    for q in $3; do
      quant=()
      [[ $q == bf16 ]] || quant=(--quantize "$q")
      bench_with "$B/roseinfer" "${model//-/}_b${b}_$q${SUFFIX:-}" "$b" --model "$model" "${quant[@]}"
    done
  done
}

# transformers' batch-1 decode on random checkpoints of the gpt2 / llama-1b shapes
# (.peers/make_models.py, carried from ../shared/peers), one summary line each: MODELS are
# make_models.py's names (gpt2, llama1b). Does nothing when .peers is not carried.
peer_b1() {  # MODELS...
  [[ -f .peers/make_models.py ]] || return 0
  step peer_make_models 150 python3 .peers/make_models.py /tmp/models "$@"
  local m
  for m in "$@"; do
    peer_decode_b1 "$m" "/tmp/models/$m"
  done
}

# transformers' batch-1 decode of the checkpoint in MODEL_DIR (scripts/peer_decode_b1.py) as step
# peer_NAME_b1, its JSON line added to the summary; e.g. NAME smollm2-shape, MODEL_DIR
# /tmp/models/smollm2-shape after scripts/make_smollm2_shape.py /tmp/models.
peer_decode_b1() {  # NAME MODEL_DIR
  local name=$1 dir=$2
  step "peer_${name}_b1" 200 python3 scripts/peer_decode_b1.py "$dir" \
    --json "$OUT/peer_${name}_b1.json"
  tail -n 1 "$OUT/peer_${name}_b1.txt" | sed "s/^/peer_${name}_b1: /" | tee -a "$SUMMARY"
}

# One `roseinfer bench --device cuda ARGS... --json $OUT/NAME.json` as step NAME (200 s limit),
# or a "skipped" line once the script has run past $DEADLINE seconds. The VAR=VALUE words before
# `--` are the run's environment; BENCH_BIN, when set, is the binary (default $B/roseinfer).
deadline_bench() {  # NAME [VAR=VALUE...] -- ARGS...
  local name=$1
  shift
  local envs=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    envs+=("$1")
    shift
  done
  shift
  if ((SECONDS > ${DEADLINE:-540})); then
    echo "$name: skipped (past ${DEADLINE:-540}s)" | tee -a "$SUMMARY"
    return 0
  fi
  step "$name" 200 env "${envs[@]}" "${BENCH_BIN:-$B/roseinfer}" bench --device cuda "$@" \
    --json "$OUT/$name.json"
}

# A table of every $OUT/*.json bench result, appended to $SUMMARY: each run's decode step (decode
# time / decode steps, ms), decode, prefill and output tok/s.
decode_step_table() {
  python3 - "$OUT" <<'PY' | tee -a "$SUMMARY"
import glob, json, os, sys
print("| run | decode step ms | decode tok/s | prefill tok/s | output tok/s |")
print("|---|---|---|---|---|")
for path in sorted(glob.glob(f"{sys.argv[1]}/*.json")):
    try:
        r = json.load(open(path))["runs"][0]
    except Exception as e:
        print(f"| {os.path.basename(path)} | unreadable: {e} |"); continue
    steps = r.get("decode_steps") or 0
    ms = 1e3 * r.get("decode_time_s", 0) / steps if steps else float("nan")
    print(f"| {os.path.basename(path)[:-5]} | {ms:.3f} | {r.get('decode_throughput', 0):.0f} | "
          f"{r.get('prefill_throughput', 0):.0f} | {r.get('output_throughput', 0):.0f} |")
PY
}

# Packs every file of $OUT except summary.txt into $OUT/outputs.tgz (and removes them), so a call
# with many steps stays under the number of files a device call brings back.
device_pack() {
  (cd "$OUT" && find . -type f ! -name summary.txt ! -name outputs.tgz -print0 |
    tar czf outputs.tgz --null -T - --remove-files)
}
