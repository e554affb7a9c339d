/work/main/bundle/roseinfer bench --model gpt2 --dataset-name seed000 --device cuda --mode offline --batch-invariant --max-model-len 4096 --json /tmp/issue10_work/bench/seed000_gpt2_invariant.json
