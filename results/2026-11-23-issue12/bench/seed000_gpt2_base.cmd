/work/main/bundle/roseinfer-base bench --device cuda --mode offline --model gpt2 --dataset-name seed000 --json /tmp/issue12_work/bench/seed000_gpt2_base.json
