#!/usr/bin/env bash
# --data-parallel over MPI ranks (engine/cluster/ranks.h): `mpirun -np 3 roseinfer bench ...
# --data-parallel 3` must give what the in-process cluster gives (same tokens per request, cache
# hits, per-replica placement; only timings differ, but not on the sim backend, whose ranks also
# advance at the same time), and bad launches are usage errors (exit 2).
# Registered by CMake only when MPI is built in and mpirun exists. $1 is the binary.
source "$(dirname "$0")/cli-common.bash"
if ldd "$BIN" 2>/dev/null | grep -q libasan; then
  # Open MPI's own start-up allocations (hwloc, PMIx) are reported as leaks by LeakSanitizer and
  # are not roseinfer's; suppressing them would also hide real ones, so ASan builds skip this test.
  echo "skip: ASan build (libmpi's start-up allocations read as leaks)"
  exit 77
fi
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
# One node, no network: shared memory and the loopback are all the ranks need.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# A machine whose mpirun cannot start two plain processes (a container without the shared memory
# or process controls Open MPI needs) cannot run this test at all: skipped, saying why, rather
# than failed for a fault that is not roseinfer's.
if ! timeout 60 "${MPIRUN[@]}" -np 2 true >"$TMP/probe.txt" 2>&1; then
  echo "skip: mpirun cannot start 2 processes here:"
  head -n 5 "$TMP/probe.txt"
  exit 77
fi

WL=(--dataset-name prefix-groups:6:4:x2:16 --random-output-len 4 --num-kv-blocks 16 --block-size 16
    --seed 1 --save-detailed "${COMMON[@]}")
# The keys that must agree, one line each: per-request tokens and cache hits, the routing hit
# rates and imbalance, per-replica placement and hit rates.
# With a second argument, the virtual clocks' times too (the sim backend).
summary() {
  python3 - "$@" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
keys = ["output_ids", "cached_tokens", "output_lens"]
if len(sys.argv) > 2:
    keys += ["ttfts", "e2els", "itls", "arrivals", "first_scheduled", "step_times",
             "step_kv_used_blocks"]
for key in keys:
    print(key, run[key])
for key in ("routing_predicted_hit_rate", "routing_delivered_hit_rate", "routing_available_hit_rate",
            "request_imbalance", "token_imbalance", "prefix_cache_hit_rate", "data_parallel"):
    print(key, run[key])
for i, r in enumerate(run["per_replica"]):
    print("replica", i, r["requests"], r["prompt_tokens"], r["output_tokens"], r["prefix_cache_hit_rate"])
PY
}

for router in round_robin precise; do
  "$BIN" bench "${WL[@]}" --data-parallel 3 --router $router --json "$TMP/in_$router.json" \
    >/dev/null 2>"$TMP/in_$router.err"
  check "in-process --data-parallel 3 --router $router exits 0" [ $? -eq 0 ]
  "${MPIRUN[@]}" -np 3 "$BIN" bench "${WL[@]}" --data-parallel 3 --router $router \
    --json "$TMP/mpi_$router.json" >"$TMP/mpi_$router.out" 2>"$TMP/mpi_$router.err"
  status=$?
  check "mpirun -np 3 --router $router exits 0" [ $status -eq 0 ]
  [ $status -eq 0 ] || cat "$TMP/mpi_$router.err"
  check "  one report (rank 0 prints the table once)" \
    [ "$(grep -c "router $router: hit rate predicted" "$TMP/mpi_$router.out")" -eq 1 ]
  check "  device line names the 3 ranks" grep -q "over 3 MPI ranks" "$TMP/mpi_$router.out"
  summary "$TMP/in_$router.json" >"$TMP/in_$router.sum" 2>&1
  summary "$TMP/mpi_$router.json" >"$TMP/mpi_$router.sum" 2>&1
  check "  same tokens, hits and placement as in one process" \
    cmp -s "$TMP/in_$router.sum" "$TMP/mpi_$router.sum"
  cmp -s "$TMP/in_$router.sum" "$TMP/mpi_$router.sum" ||
    diff "$TMP/in_$router.sum" "$TMP/mpi_$router.sum" | head -5
done
check "the summaries hold tokens" grep -q "^output_ids \[\[" "$TMP/mpi_precise.sum"

# 6 replicas on 3 ranks (2 each): still the in-process result.
"$BIN" bench "${WL[@]}" --data-parallel 6 --router precise --json "$TMP/in6.json" >/dev/null 2>&1
"${MPIRUN[@]}" -np 3 "$BIN" bench "${WL[@]}" --data-parallel 6 --router precise \
  --json "$TMP/mpi6.json" >/dev/null 2>"$TMP/mpi6.err"
check "mpirun -np 3 --data-parallel 6 exits 0" [ $? -eq 0 ]
summary "$TMP/in6.json" >"$TMP/in6.sum" 2>&1
summary "$TMP/mpi6.json" >"$TMP/mpi6.sum" 2>&1
check "  same as in one process" cmp -s "$TMP/in6.sum" "$TMP/mpi6.sum"

# The sim backend, online: its replicas advance at the same time (on their ranks, two per rank on
# their threads) between the arrivals, and their virtual clocks give the very same times.
SIM=(--backend sim --sim-model results/2026-11-23-sim-calibration/llama-1b-h100.json
     --request-rate 400 --data-parallel 6 --router least_loaded)
"$BIN" bench "${WL[@]}" "${SIM[@]}" --json "$TMP/in_sim.json" >/dev/null 2>&1
check "in-process --backend sim --data-parallel 6 exits 0" [ $? -eq 0 ]
"${MPIRUN[@]}" -np 3 "$BIN" bench "${WL[@]}" "${SIM[@]}" --json "$TMP/mpi_sim.json" \
  >/dev/null 2>"$TMP/mpi_sim.err"
check "mpirun -np 3 --backend sim --data-parallel 6 exits 0" [ $? -eq 0 ]
summary "$TMP/in_sim.json" times >"$TMP/in_sim.sum" 2>&1
summary "$TMP/mpi_sim.json" times >"$TMP/mpi_sim.sum" 2>&1
check "  same tokens, placement and times as in one process" cmp -s "$TMP/in_sim.sum" "$TMP/mpi_sim.sum"
cmp -s "$TMP/in_sim.sum" "$TMP/mpi_sim.sum" || diff "$TMP/in_sim.sum" "$TMP/mpi_sim.sum" | head -5
check "  the summaries hold times" grep -q "^ttfts \[" "$TMP/mpi_sim.sum"

# A rank that dies mid-run (killed here, as an out-of-memory kill or a lost node would) fails the
# whole run: mpirun ends every rank, exits nonzero naming the dead rank (replica i runs on rank
# i % R), and no report is left behind (rank 0 writes it only at the end, through a renamed
# temporary file). The workload lasts tens of seconds, so the rank dies while replicas step.
"${MPIRUN[@]}" -np 3 "$BIN" bench "${COMMON[@]}" --dataset-name random --num-prompts 300 \
  --random-input-len 64 --random-output-len 64 --data-parallel 3 --json "$TMP/dead.json" \
  >"$TMP/dead.out" 2>"$TMP/dead.err" &
launcher=$!
victim=""
for _ in $(seq 200); do  # rank 2's process: the one whose environment says so
  for pid in $(pgrep -f -- "$TMP/dead.json"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2 && victim=$pid
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
check "rank 2's process found" [ -n "$victim" ]
sleep 1
[ -n "$victim" ] && kill -9 "$victim"
wait $launcher
status=$?
check "a rank killed mid-run fails the run (exit $status)" [ $status -ne 0 ]
check "  the message names the dead rank" grep -q "rank 2 .*exited on signal 9" "$TMP/dead.err"
check "  no report written" [ ! -e "$TMP/dead.json" ]
check "  no temporary report left" [ -z "$(ls "$TMP" | grep '^dead\.json.')" ]

# Usage errors, exit 2, naming the flag.
"${MPIRUN[@]}" -np 2 "$BIN" bench "${WL[@]}" --data-parallel 3 >/dev/null 2>"$TMP/np2.err"
check "mpirun -np 2 with --data-parallel 3 exits 2" [ $? -eq 2 ]
check "  naming --data-parallel and the ranks" grep -q "data-parallel 3 over 2 MPI ranks" "$TMP/np2.err"
check "  said once (rank 0)" [ "$(grep -c 'over 2 MPI ranks' "$TMP/np2.err")" -eq 1 ]
"${MPIRUN[@]}" -np 2 "$BIN" info >/dev/null 2>"$TMP/info.err"
check "mpirun -np 2 roseinfer info exits 2" [ $? -eq 2 ]
check "  saying only bench runs under mpirun" grep -q "only \`roseinfer bench" "$TMP/info.err"
# A binary without MPI sees mpirun only through the environment: the same launch then is refused
# by that binary (simulated here by the variables Open MPI sets).
OMPI_COMM_WORLD_SIZE=1 "$BIN" bench "${WL[@]}" --data-parallel 3 --json "$TMP/np1.json" \
  >/dev/null 2>&1
check "a launcher's world of 1 is a plain process" [ $? -eq 0 ]

finish mpi
