/work/main/bundle/roseinfer bench --model llama-1b --dataset-name grid:1:512:128 --device cuda --mode offline --json /tmp/issue10_work/bench/grid_llama1b_b1_new.json
