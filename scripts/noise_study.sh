#!/usr/bin/env bash
# Issue 15's noise study, run ON the GPU machine from the repository root: how often would CI call
# two runs of the SAME binary a regression? `compare` with a fixed 5% threshold on single runs,
# against `compare`'s noise-aware rule on `bench --repeat N` results (a change counts only beyond
# both the threshold and the two 95% intervals' half-widths).
#
#   BUNDLE_DIR=/path/to/unpacked/bundle bash scripts/noise_study.sh
#
# For each configuration (seed000 as scripts/device/bench_device.sh runs it, on gpt2, here in offline mode
# with the prefix cache on, the reference's headline run; and the decode grid at B=1 on llama-1b,
# grid:1:512:128), it runs two sets, A and B, of REPEATS single runs, each in its own process (two
# "commits" of one binary), and REPEAT_SETS runs of `bench --repeat REPEATS`. Then it calls
# `compare --max-regression 5%` on all REPEATS x REPEATS pairs (A_i base, B_j new) and on every
# ordered pair of the repeated results, and counts exit 1 (regression). Everything lands in $OUT:
# noise_study.md (the summary, with timings), noise_study.tgz (every JSON, log and compare output).
# Defaults (REPEATS=10, REPEAT_SETS=2): about 80 s of runs plus 200 compare calls on an H100.
#
# CPU check (the mode it was tested in before going to the GPU):
#   BIN=build/roseinfer MODEL_SEED=tiny MODEL_GRID=tiny DEVICE=cpu SEED_PROMPTS=8 \
#     GRID=grid:1:64:16 REPEATS=3 OUT=/tmp/noise bash scripts/noise_study.sh
set -uo pipefail
if [[ -z ${BUNDLE_DIR:-} && ! -x bundle/roseinfer && -f bundle-pack/bundle.tar.xz ]]; then
  tar xJf bundle-pack/bundle.tar.xz
fi
B=${BUNDLE_DIR:-$PWD/bundle}
BIN=${BIN:-$B/roseinfer}
export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-/tmp/noise_out}
DEVICE=${DEVICE:-cuda}
MODEL_SEED=${MODEL_SEED:-gpt2}
MODEL_GRID=${MODEL_GRID:-llama-1b}
GRID=${GRID:-grid:1:512:128}
REPEATS=${REPEATS:-10}
REPEAT_SETS=${REPEAT_SETS:-2}
THRESHOLD=${THRESHOLD:-5%}
W=/tmp/noise_study_work
rm -rf "$W" && mkdir -p "$W" "$OUT"
[[ -x $BIN ]] || { echo "no roseinfer binary at $BIN (set BUNDLE_DIR or BIN)"; exit 2; }
START=$SECONDS

SEED_ARGS=(--model "$MODEL_SEED" --device "$DEVICE" --dataset-name seed000 --mode offline)
[[ -n ${SEED_PROMPTS:-} ]] && SEED_ARGS+=(--num-prompts "$SEED_PROMPTS")
GRID_ARGS=(--model "$MODEL_GRID" --device "$DEVICE" --dataset-name "$GRID" --mode offline
  --max-num-seqs 256 --max-num-batched-tokens 16384)

bench() {  # NAME ARGS...: one bench process, JSON and log into $W
  local name=$1
  shift
  timeout 120 "$BIN" bench "$@" --json "$W/$name.json" >"$W/$name.txt" 2>&1 ||
    { echo "bench $name failed:"; tail -n 5 "$W/$name.txt"; }
}

verdict() {  # BASE NEW LOG: compare's exit status (0 ok, 1 regression, 2 error), output appended
  "$BIN" compare "$1" "$2" --max-regression "$THRESHOLD" >>"$3" 2>&1
  echo $?
}

# The metrics compare flagged, most often first ("3x p99_itl_ms, 1x median_tpot_ms").
flagged_metrics() {
  grep 'REGRESSION' "$1" | grep -oE 'cache (on|off) +[a-z0-9_]+' | awk '{print $3}' |
    sort | uniq -c | sort -rn |
    awk '{printf "%s%sx %s", (NR > 1 ? ", " : ""), $1, $2} END {if (NR == 0) printf "none"}'
}

study() {  # NAME ARGS...: the runs and comparisons of one configuration, one summary row
  local name=$1
  shift
  local t_start=$SECONDS t0=$SECONDS
  for set in A B; do
    for ((i = 1; i <= REPEATS; i++)); do bench "${name}_${set}$i" "$@"; done
  done
  local t_single=$((SECONDS - t0))
  t0=$SECONDS
  for ((s = 1; s <= REPEAT_SETS; s++)); do bench "${name}_rep$s" "$@" --repeat "$REPEATS"; done
  local t_repeat=$((SECONDS - t0))
  local single=0 single_err=0 pairs=0 repeated=0 repeated_err=0 rpairs=0 rc
  for ((i = 1; i <= REPEATS; i++)); do
    for ((j = 1; j <= REPEATS; j++)); do
      rc=$(verdict "$W/${name}_A$i.json" "$W/${name}_B$j.json" "$W/${name}_compare_single.txt")
      pairs=$((pairs + 1))
      [[ $rc == 1 ]] && single=$((single + 1))
      [[ $rc == 2 ]] && single_err=$((single_err + 1))
    done
  done
  for ((a = 1; a <= REPEAT_SETS; a++)); do
    for ((b = 1; b <= REPEAT_SETS; b++)); do
      [[ $a == "$b" ]] && continue
      rc=$(verdict "$W/${name}_rep$a.json" "$W/${name}_rep$b.json" "$W/${name}_compare_repeated.txt")
      rpairs=$((rpairs + 1))
      [[ $rc == 1 ]] && repeated=$((repeated + 1))
      [[ $rc == 2 ]] && repeated_err=$((repeated_err + 1))
    done
  done
  printf '| %s | %d of %d (%d%%)%s | %s | %d of %d%s | %s | %ss + %ss |\n' "$name" "$single" \
    "$pairs" $((100 * single / (pairs > 0 ? pairs : 1))) \
    "$([[ $single_err != 0 ]] && echo ", $single_err errors")" \
    "$(flagged_metrics "$W/${name}_compare_single.txt")" "$repeated" "$rpairs" \
    "$([[ $repeated_err != 0 ]] && echo ", $repeated_err errors")" \
    "$(flagged_metrics "$W/${name}_compare_repeated.txt")" "$t_single" "$t_repeat" >>"$W/rows.md"
  echo "$name: single pairs flagged $single/$pairs, repeated flagged $repeated/$rpairs" \
    "(runs: ${t_single}s single, ${t_repeat}s repeated; $((SECONDS - t_start))s with the compares)"
}

"$BIN" --version | tee "$W/version.txt"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$W/device.txt"
study seed000 "${SEED_ARGS[@]}"
study "grid_b1" "${GRID_ARGS[@]}"

{
  echo "# Noise study: the same binary compared with itself"
  echo
  echo "$("$BIN" --version | head -n 1); device $(cat "$W/device.txt" 2>/dev/null || echo "$DEVICE");" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ); total $((SECONDS - START)) s."
  echo
  echo "- seed000: \`roseinfer bench ${SEED_ARGS[*]}\`"
  echo "- grid_b1: \`roseinfer bench ${GRID_ARGS[*]}\`"
  echo
  echo "Single runs: sets A and B of $REPEATS runs each (one process per run); every pair (A_i, B_j)"
  echo "compared with \`compare A_i B_j --max-regression $THRESHOLD\` (a fixed threshold; a single run"
  echo "has no spread). Repeated: $REPEAT_SETS runs of \`--repeat $REPEATS\`, every ordered pair compared"
  echo "the same way, where compare's noise-aware rule applies. Any flag here is a false alarm."
  echo
  echo "| configuration | single runs flagged at $THRESHOLD | metrics flagged (single) | repeated results flagged | metrics flagged (repeated) | time: singles + repeated |"
  echo "|---|---|---|---|---|---|"
  cat "$W/rows.md"
  echo
  echo "## compare of the repeated results (noise-aware)"
  for name in seed000 grid_b1; do
    echo
    echo "### $name"
    echo
    echo '```'
    cat "$W/${name}_compare_repeated.txt"
    echo '```'
  done
} >"$OUT/noise_study.md"
tar czf "$OUT/noise_study.tgz" -C "$W" .
echo "== $OUT/noise_study.md"
cat "$OUT/noise_study.md"
