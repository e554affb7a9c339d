roseinfer bench --model llama-1b --device cuda --dataset-name grid:16:512:128 --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --json grid_llama-1b_b16.json
