roseinfer bench --model gpt2 --device cuda --dataset-name grid:64:512:128 --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --json grid_gpt2_b64.json
