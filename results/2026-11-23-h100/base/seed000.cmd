roseinfer bench --model gpt2 --device cuda --dataset-name seed000 --mode all --both-cache-settings --json seed000.json
