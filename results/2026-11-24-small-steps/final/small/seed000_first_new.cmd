/work/main/bundle/roseinfer bench --device cuda --mode offline --model gpt2 --dataset-name seed000 --json /tmp/b1_work/seed000_first_new.json
