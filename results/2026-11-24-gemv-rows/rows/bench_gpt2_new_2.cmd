/work/main/bundle/roseinfer bench --device cuda --model gpt2 --dataset-name grid:1:512:128 --mode offline --json /tmp/gemv_rows_work/bench_gpt2_new_2.json
