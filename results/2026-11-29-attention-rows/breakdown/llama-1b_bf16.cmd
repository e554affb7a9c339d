env /work/main/bundle/roseinfer bench --device cuda --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --dataset-name grid:1:512:128 --model llama-1b --json /root/out/llama-1b_bf16.json
