#!/usr/bin/env bash
# The layers of DESIGN.md, checked on every include: kernels/ sit below engine/, engine/ below cli/,
# and the host-side logic (everything in engine/ except the backends) includes no CUDA. A line that
# breaks a rule is printed with its file and line, and the test fails.
set -u
cd "$(dirname "$0")/.."
status=0

# $1: rule text; $2: folders to scan; $3: extended regex an include line must not match.
forbid() {
  local rule=$1 folders=$2 pattern=$3 hits
  # shellcheck disable=SC2086
  hits=$(grep -rnE --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
    "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($pattern)" $folders)
  if [ -n "$hits" ]; then
    echo "layering: $rule"
    echo "$hits"
    status=1
  fi
}

forbid "kernels/ must not include engine/ or cli/ headers" kernels 'engine/|cli/'
forbid "engine/ must not include cli/ headers" engine 'cli/'
host_logic=$(ls -d engine/*/ | grep -v '^engine/backend/$')
forbid "host-side logic (engine/ outside backend/) must not include CUDA" "$host_logic" \
  'cuda|cublas|nccl|kernels/cuda/'

[ "$status" = 0 ] && echo "layering: kernels < engine < cli holds; host logic has no CUDA includes"
exit "$status"
