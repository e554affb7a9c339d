/work/main/bundle/roseinfer bench --device cuda --mode offline --model llama-1b --quantize q4_k --dataset-name grid:1:512:128 --json /tmp/issue12_work/real/llama1b_b1_q4_k.json
