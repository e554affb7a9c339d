# Sourced by the device scripts (session_device.sh, issue10_device.sh): run one named step with a
# time limit, its output in $OUT/NAME.txt and its command in $OUT/NAME.cmd, and a PASS / SKIP (exit
# 77) / FAIL line appended to $SUMMARY and printed, with the output's tail on failure. Never fails
# itself, so one broken step does not stop the call.
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
