roseinfer bench --model llama-1b --device cuda --dataset-name grid:64:512:128 --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --json grid_llama-1b_b64.json
