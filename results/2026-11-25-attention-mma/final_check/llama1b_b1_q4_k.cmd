/work/main/bundle/roseinfer bench --device cuda --mode offline --dataset-name grid:1:512:128 --model llama-1b --quantize q4_k --json /tmp/final_check_work/llama1b_b1_q4_k.json
