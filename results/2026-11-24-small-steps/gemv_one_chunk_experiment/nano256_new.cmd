/work/main/bundle/roseinfer bench --device cuda --mode offline --model llama-1b --dataset-name nano256 --max-num-seqs 256 --max-num-batched-tokens 16384 --json /tmp/b1_work/nano256_new.json
