# Sourced by the tests/cli_*.sh scripts: $1 is the roseinfer binary (exit 77, skipped, when it is
# not built), a private temporary folder, a failure count and check/finish helpers.
set -u
BIN=${1:-}
[ -n "$BIN" ] && [ -x "$BIN" ] || { echo "skip: roseinfer binary not built"; exit 77; }
cd "$(dirname "${BASH_SOURCE[1]}")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
COMMON=(--model tiny --device cpu)
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
finish() {  # finish NAME: exit 1 when any check failed
  [ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
  echo "all $1 checks passed"
}
