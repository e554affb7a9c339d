/work/main/bundle/roseinfer bench --model llama-1b --device cuda --dataset-name grid:1:512:128 --mode offline --json /tmp/peer_work/roseinfer_b1.json
