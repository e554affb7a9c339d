/work/main/bundle/roseinfer bench --device cuda --mode offline --dataset-name grid:1:512:128 --model llama-1b --json /tmp/final_check_work/llama1b_b1_bf16.json
