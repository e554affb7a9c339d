roseinfer bench --model llama-1b --device cuda --dataset-name serve --mode online --sweep request-rate=32,64,96,128,160,192,256,inf --slo ttft=100,tpot=10  --json serve_sweep_cache_on.json
