/work/main/bundle/roseinfer bench --device cuda --mode offline --model llama-8b --dataset-name grid:1:512:128 --max-model-len 4096 --json /tmp/issue12_work/bench/llama8b_b1_bf16.json
