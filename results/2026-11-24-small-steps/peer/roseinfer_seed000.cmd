/work/main/bundle/roseinfer bench --model gpt2 --device cuda --dataset-name seed000 --mode all --both-cache-settings --json /tmp/peer_work/roseinfer_seed000.json
