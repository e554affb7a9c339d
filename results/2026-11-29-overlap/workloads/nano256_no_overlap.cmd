/work/main/bundle/roseinfer bench --device cuda --model llama-1b --dataset-name nano256 --mode all --no-overlap --json /root/out/nano256_no_overlap.json
