#!/usr/bin/env bash
# Peak RSS of a streamed `roseinfer run` against file size: 10k, 100k and 1M one-token prompts on
# the tiny preset (CPU), with the default KV pool and with a 256-block one. $1: the binary; run in
# an empty folder. Appends "lines bytes peak-RSS wall" rows to rss.txt (default pool) and rss2.txt.
set -u
BIN=$1
for n in 10000 100000 1000000; do
  awk -v n=$n 'BEGIN{for(i=0;i<n;i++){printf "{\"id\":\"r%d\",\"prompt\":\"%c\"}\n", i, 97+i%26}}' >one$n.jsonl
done
run() {  # run N SUFFIX EXTRA_FLAGS...
  local n=$1 tag=$2; shift 2
  rm -f out$tag$n.jsonl out$tag$n.jsonl.partial
  ROSEINFER_PRINT_PEAK_RSS=1 /usr/bin/time -f "time: %e s wall, %M KB maxrss" "$BIN" run one$n.jsonl \
    -o out$tag$n.jsonl --model tiny --device cpu --max-tokens 1 "$@" >log$tag$n.txt 2>&1
  echo "$n $(stat -c %s one$n.jsonl) $(grep -o 'peak RSS [0-9]* KiB' log$tag$n.txt) $(grep time: log$tag$n.txt) lines=$(wc -l <out$tag$n.jsonl)"
}
for n in 10000 100000 1000000; do run $n "" >>rss.txt; done
for n in 10000 100000 1000000; do run $n b --num-kv-blocks 256 >>rss2.txt; done
