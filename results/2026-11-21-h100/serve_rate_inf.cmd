roseinfer bench --model llama-1b --device cuda --dataset-name serve --mode online --request-rate inf --both-cache-settings --json serve_rate_inf.json
