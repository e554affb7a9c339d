#!/usr/bin/env bash
# Issue 15's request-rate sweep, run ON the GPU machine from the repository root: the serve workload
# (500 requests of 550 tokens, 330 shared, 150 output; online arrivals) on llama-1b, one online run
# per request rate from light load to past saturation (the H100 served about 190 req/s at
# --request-rate inf, results/2026-11-21-h100/serve_rate_inf.txt), once with the prefix cache on
# and once with --no-prefix-cache, under an SLO; then `roseinfer report` of both, overlaid.
#
#   BUNDLE_DIR=/path/to/unpacked/bundle bash scripts/serve_sweep.sh
#
# Writes into $OUT: serve_sweep_cache_{on,off}.{json,txt,cmd}, serve_sweep_report.html (the
# throughput-latency curves with the SLO line and the highest rate meeting it), serve_sweep.md
# (both sweep tables as markdown, the commands and timings). Copy them into results/ to commit.
# Defaults: about 45 s of arrivals per sweep, under 2 minutes for both on an H100.
#   RATES (32,64,96,128,160,192,256,inf)  SLO (ttft=100,tpot=10, in ms)  NUM_PROMPTS (the
#   workload's 500)  EXTRA_ARGS (more bench flags)
#
# CPU check (the mode it was tested in before going to the GPU):
#   BIN=build/roseinfer MODEL=tiny DEVICE=cpu NUM_PROMPTS=6 RATES=2,8,inf SLO=ttft=3000,tpot=100 \
#     OUT=/tmp/sweep bash scripts/serve_sweep.sh      (50 s on this 2-core CPU)
set -uo pipefail
if [[ -z ${BUNDLE_DIR:-} && ! -x bundle/roseinfer && -f bundle-pack/bundle.tar.xz ]]; then
  tar xJf bundle-pack/bundle.tar.xz
fi
B=${BUNDLE_DIR:-$PWD/bundle}
BIN=${BIN:-$B/roseinfer}
export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=${OUT:-/tmp/serve_sweep_out}
MODEL=${MODEL:-llama-1b}
DEVICE=${DEVICE:-cuda}
RATES=${RATES:-32,64,96,128,160,192,256,inf}
SLO=${SLO:-ttft=100,tpot=10}
mkdir -p "$OUT"
[[ -x $BIN ]] || { echo "no roseinfer binary at $BIN (set BUNDLE_DIR or BIN)"; exit 2; }
START=$SECONDS

ARGS=(--model "$MODEL" --device "$DEVICE" --dataset-name serve --mode online
  --sweep "request-rate=$RATES" --slo "$SLO")
[[ -n ${NUM_PROMPTS:-} ]] && ARGS+=(--num-prompts "$NUM_PROMPTS")
# shellcheck disable=SC2206  # EXTRA_ARGS is a list of flags
[[ -n ${EXTRA_ARGS:-} ]] && ARGS+=($EXTRA_ARGS)

"$BIN" --version | tee "$OUT/version.txt"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"

sweep() {  # CACHE FLAGS...: one sweep: its JSON, its stdout (the sweep table) and its command
  local cache=$1 name=serve_sweep_cache_$1 start=$SECONDS
  shift
  echo "roseinfer bench ${ARGS[*]} $* --json $name.json" >"$OUT/$name.cmd"
  timeout 200 "$BIN" bench "${ARGS[@]}" "$@" --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
  local rc=$?
  printf 'cache %-4s rc=%s %ss\n' "$cache" "$rc" "$((SECONDS - start))" | tee -a "$OUT/timings.txt"
  sed -n '/== sweep over/,$p' "$OUT/$name.txt"
  [[ $rc != 0 ]] && tail -n 20 "$OUT/$name.txt"
  return 0
}

sweep on
sweep off --no-prefix-cache
"$BIN" report "$OUT/serve_sweep_cache_on.json" "$OUT/serve_sweep_cache_off.json" \
  -o "$OUT/serve_sweep_report.html" || echo "report failed"

{
  echo "# Request-rate sweep: serve workload on $MODEL, prefix cache on and off"
  echo
  echo "$("$BIN" --version | head -n 1); device $(cat "$OUT/device.txt" 2>/dev/null || echo "$DEVICE");" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ); total $((SECONDS - START)) s; SLO $SLO (ms)."
  for cache in on off; do
    echo
    echo "## prefix cache $cache"
    echo
    echo "\`$(cat "$OUT/serve_sweep_cache_$cache.cmd")\`"
    echo
    echo '```'
    sed -n '/== sweep over/,$p' "$OUT/serve_sweep_cache_$cache.txt"
    echo '```'
  done
  echo
  echo "Timings:"
  echo
  echo '```'
  cat "$OUT/timings.txt"
  echo '```'
  echo
  echo "The throughput-latency curves of both: serve_sweep_report.html."
} >"$OUT/serve_sweep.md"
echo "== wrote $OUT/serve_sweep.md and $OUT/serve_sweep_report.html in $((SECONDS - START)) s"
