#!/usr/bin/env bash
# The benchmark workloads of reference/benchmarks.md, run ON the GPU machine from the repo root, with
# bundle/ or bundle-pack/ (scripts/make_bundle.sh) and .peers/ (a copy of ../shared/peers) carried. Our engine and the
# Hugging Face transformers peer run in the same call, on the same GPU, one after the other.
#   scripts/device/bench_device.sh [PART...]   parts: grid seed000 nano256 serve peers (default: all)
# Every result lands in $OUT/results.tgz (one file, because the device tool returns at most 8):
# NAME.json (results JSON), NAME.txt (stdout+stderr), NAME.cmd (the exact command).
set -uo pipefail
# The carried bundle may come packed (scripts/make_bundle.sh writes bundle-pack/bundle.tar.xz).
if [[ ! -x bundle/roseinfer && -f bundle-pack/bundle.tar.xz ]]; then tar xJf bundle-pack/bundle.tar.xz; fi
OUT=${OUT:-/tmp/bench_out}
# BUNDLE_DIR / RESULTS_NAME let one call measure two builds side by side (e.g. the previous
# commit's bundle unpacked into bundle-base/).
NAME=${RESULTS_NAME:-results}
R=/tmp/bench_$NAME
rm -rf "$R" && mkdir -p "$R" "$OUT"
B=${BUNDLE_DIR:-$PWD/bundle}
export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
BIN=$B/roseinfer
PARTS=("$@")
[[ ${#PARTS[@]} == 0 ]] && PARTS=(grid seed000 nano256 serve peers)
want() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  "$BIN" --version
} | tee "$R/device.txt"

bench() {  # NAME LIMIT_S ARGS...
  local name=$1 limit=$2
  shift 2
  echo "roseinfer bench $* --json $name.json" >"$R/$name.cmd"
  local start=$SECONDS
  timeout "$limit" "$BIN" bench "$@" --json "$R/$name.json" >"$R/$name.txt" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - start))" | tee -a "$R/summary.txt"
  [[ $rc != 0 ]] && tail -n 20 "$R/$name.txt"
  return 0
}

if want grid; then
  for model in gpt2 llama-1b; do
    for b in 1 16 64 256; do
      bench "grid_${model}_b${b}" 120 --model "$model" --device cuda --dataset-name "grid:$b:512:128" \
        --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384
    done
  done
fi
if want seed000; then
  bench seed000 120 --model gpt2 --device cuda --dataset-name seed000 --mode all --both-cache-settings
fi
if want nano256; then
  bench nano256 180 --model llama-1b --device cuda --dataset-name nano256 --mode offline \
    --max-num-seqs 256 --max-num-batched-tokens 16384
fi
if want serve; then
  for rate in inf 32 8; do
    bench "serve_rate_${rate}" 200 --model llama-1b --device cuda --dataset-name serve --mode online \
      --request-rate "$rate" --both-cache-settings
  done
fi
if want peers; then
  start=$SECONDS
  python3 .peers/make_models.py /tmp/models gpt2 llama1b >"$R/peer_make_models.txt" 2>&1
  echo "peer models made in $((SECONDS - start))s" | tee -a "$R/summary.txt"
  for spec in "gpt2 seed000" "llama1b nano256"; do
    set -- $spec
    start=$SECONDS
    echo "python3 ../shared/peers/hf_cb_peer.py MODELS/$1 $2 --json peer_$2.json" >"$R/peer_$2.cmd"
    PYTHONUNBUFFERED=1 timeout 300 python3 .peers/hf_cb_peer.py "/tmp/models/$1" "$2" \
      --json "$R/peer_$2.json" >"$R/peer_$2.txt" 2>&1
    printf '%-28s rc=%-3s %4ss\n' "peer_$2" "$?" "$((SECONDS - start))" | tee -a "$R/summary.txt"
    tail -n 1 "$R/peer_$2.txt"
  done
fi

tar czf "$OUT/$NAME.tgz" -C "$R" .
echo "== summary"
cat "$R/summary.txt"
