set -uo pipefail
FINAL=$OUT; OUT=/tmp/tc_work; mkdir -p $OUT
source scripts/device_step.sh; device_begin
fig() { python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))['runs'][0]
print(sys.argv[2], 'decode_tok_s=%.0f output_tok_s=%.0f prefill_tok_s=%.0f dur=%.4f' % (r.get('decode_throughput',0), r['output_throughput'], r.get('prefill_throughput',0), r['duration']))" $1 $2 | tee -a $OUT/figures.txt; }
for round in 1 2; do
for min in 0 16 64; do
  for w in "b16:--model llama-1b --dataset-name grid:16:512:128" "b64:--model llama-1b --dataset-name grid:64:512:128" "b256:--model llama-1b --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384" "nano256:--model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384" "gpt2b256:--model gpt2 --dataset-name grid:256:512:128 --max-num-seqs 256 --max-num-batched-tokens 16384" "seed000:--model gpt2 --dataset-name seed000"; do
    name=${w%%:*}; args=${w#*:}
    env ROSEINFER_CUDA_TC_DECODE_MIN_SEQS=$min $B/roseinfer bench $args --device cuda --mode offline --json $OUT/${name}_min${min}_r$round.json > $OUT/${name}_min${min}_r$round.txt 2>&1
    fig $OUT/${name}_min${min}_r$round.json ${name}_min${min}_r$round
  done
done
done
tar czf $FINAL/tc.tgz -C $OUT .
