/work/main/bundle/roseinfer bench --device cuda --model llama-1b --dataset-name grid:1:512:128 --mode offline --json /tmp/gemv_rows_work/bench_llama-1b_new_2.json
