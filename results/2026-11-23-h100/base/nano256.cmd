roseinfer bench --model llama-1b --device cuda --dataset-name nano256 --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --json nano256.json
