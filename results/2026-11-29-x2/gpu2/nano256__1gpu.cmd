/work/main/bundle/roseinfer bench --model llama-1b --device cuda --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 --mode offline --json /tmp/gpu2_work/nano256__1gpu.json
