#!/usr/bin/env bash
# seed000 (gpt2, offline, cache; 5 runs in one process): the shared-prefix attention on and off,
# and the step without attention (ROSEINFER_CUDA_SKIP), beside the previous commit's binary.
set -uo pipefail
OUT=${OUT:-/tmp/probe}; mkdir -p "$OUT"
source "$(dirname "$0")/../device_step.sh"
device_begin
run() {  # NAME ENV...
  local name=$1; shift
  printf '%-22s' "$name"
  env "$@" ${BIN:-$B/roseinfer} bench --model gpt2 --device cuda --dataset-name seed000 \
    --mode offline --repeat 5 2>&1 | grep -iE "^ +(duration|tpot|ttft|benchmark duration)" | tr -s ' ' | tr '\n' ' '
  echo
}
for i in 1 2; do
  BIN=$B/roseinfer-base run base
  run shared_on
  run shared_off ROSEINFER_CUDA_SHARED_PREFIX=0
  run skip_attention ROSEINFER_CUDA_SKIP=attention
done
