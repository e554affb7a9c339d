env /work/main/bundle/roseinfer bench --model llama-1b --dataset-name grid:1:512:128 --device cuda --mode offline --max-model-len 4096 --json /tmp/inv_work/llama1b_b1_default.json
