/work/main/bundle/roseinfer bench --device cuda --mode offline --model gpt2 --dataset-name grid:1:512:128 --json /tmp/issue12_work/real/gpt2_b1_bf16.json
