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

# The start every such script shares, once $OUT exists: unpack the carried bundle unless bundle/ is
# there, set B (the bundle) and LD_LIBRARY_PATH, start an empty $SUMMARY, and record the device,
# driver and the bundle's binaries' versions in $OUT/device.txt.
device_begin() {
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
