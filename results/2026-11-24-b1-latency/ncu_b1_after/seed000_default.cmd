env ROSEINFER_CUDA_STATS=1 /work/main/bundle/roseinfer bench --model gpt2 --device cuda --dataset-name seed000 --mode offline --repeat 3 --json /tmp/prof/seed000_default.json
