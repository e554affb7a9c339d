/work/main/bundle/roseinfer bench --device cuda --model llama-1b --dataset-name nano256 --mode all --json /root/out/nano256_new.json
