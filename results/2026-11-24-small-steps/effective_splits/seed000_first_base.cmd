/work/main/bundle/roseinfer-base bench --model gpt2 --device cuda --dataset-name seed000 --mode offline --json /tmp/b1_work/seed000_first_base.json
