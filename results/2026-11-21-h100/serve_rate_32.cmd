roseinfer bench --model llama-1b --device cuda --dataset-name serve --mode online --request-rate 32 --both-cache-settings --json serve_rate_32.json
