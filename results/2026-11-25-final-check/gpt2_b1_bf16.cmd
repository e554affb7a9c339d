/work/main/bundle/roseinfer bench --device cuda --mode offline --dataset-name grid:1:512:128 --model gpt2 --json /tmp/final_check_work/gpt2_b1_bf16.json
