#!/usr/bin/env bash
# The real model on the GPU machine, side by side with transformers in the same call (issue 9 part 5):
# greedy tokens of datasets/chat.jsonl from the SmolLM2 GGUF, ours against transformers bf16 (where each
# request first diverges), then bench on it (grid B=1 and B=256, nano256) with transformers'
# continuous batching on the same weights. Run from the repo root after scripts/model_parts.sh join,
# with bundle-pack/ (or bundle/), .peers/ (a copy of ../shared/peers) and .device-extra/ (the gguf
# wheel: transformers needs it to read GGUF) carried.
#   scripts/device/real_model_device.sh MODEL.gguf
# Everything lands in $OUT/real_model.tgz; a summary is printed last.
set -uo pipefail
MODEL=$1
if [[ ! -x bundle/roseinfer && -f bundle-pack/bundle.tar.xz ]]; then tar xJf bundle-pack/bundle.tar.xz; fi
OUT=${OUT:-/tmp/real_out}
R=/tmp/real_results
rm -rf "$R" && mkdir -p "$R" "$OUT"
B=$PWD/bundle
export LD_LIBRARY_PATH="$B:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
BIN=$B/roseinfer
if ls .device-extra/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .device-extra/*.whl && export PYTHONPATH=/tmp/site
fi

step() {  # NAME LIMIT_S COMMAND...: logs to NAME.txt, the command to NAME.cmd
  local name=$1 limit=$2
  shift 2
  echo "$*" >"$R/$name.cmd"
  local start=$SECONDS
  PYTHONUNBUFFERED=1 timeout "$limit" "$@" >"$R/$name.txt" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - start))" | tee -a "$R/summary.txt"
  [[ $rc != 0 ]] && tail -n 15 "$R/$name.txt"
  return 0
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$BIN" --version
} | tee "$R/device.txt"

# Greedy for every request, so the comparison is about the numbers, not the sampler.
python3 - datasets/chat.jsonl "$R/chat_greedy.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for line in f:
        if line.strip():
            rec = json.loads(line)
            for k in ("temperature", "top_p", "top_k", "seed"):
                rec.pop(k, None)
            out.write(json.dumps(rec) + "\n")
EOF

step ours_chat 120 "$BIN" run "$R/chat_greedy.jsonl" --model "$MODEL" --device cuda -o "$R/ours_chat.jsonl"
step peer_chat 300 python3 scripts/peer_real_model.py "$MODEL" "$R/chat_greedy.jsonl" \
  --json "$R/peer_chat.json" --save-hf /tmp/smol-hf
python3 scripts/compare_greedy.py "$R/ours_chat.jsonl" "$R/peer_chat.json" --markdown \
  >"$R/greedy_compare.md" 2>&1
cat "$R/greedy_compare.md"

for b in 1 256; do
  step "grid_smollm2_b$b" 120 "$BIN" bench --model "$MODEL" --device cuda \
    --dataset-name "grid:$b:512:128" --mode offline --max-num-seqs 256 \
    --max-num-batched-tokens 16384 --json "$R/grid_smollm2_b$b.json"
done
step nano256_smollm2 180 "$BIN" bench --model "$MODEL" --device cuda --dataset-name nano256 \
  --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --json "$R/nano256_smollm2.json"
if [[ -d /tmp/smol-hf ]]; then
  step peer_nano256_smollm2 300 python3 .peers/hf_cb_peer.py /tmp/smol-hf nano256 \
    --json "$R/peer_nano256_smollm2.json"
  step peer_grid_smollm2_b1 120 python3 .peers/hf_cb_peer.py /tmp/smol-hf fixed:1:512:128 \
    --json "$R/peer_grid_smollm2_b1.json"
fi

tar czf "$OUT/real_model.tgz" -C "$R" .
echo "== summary"
cat "$R/summary.txt"
