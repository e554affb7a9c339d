env /work/main/bundle/roseinfer bench --model gpt2 --device cuda --dataset-name seed000 --mode offline --repeat 5 --json /tmp/b1_work/seed000_new.json
