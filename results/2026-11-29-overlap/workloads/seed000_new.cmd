/work/main/bundle/roseinfer bench --device cuda --model llama-1b --dataset-name seed000 --mode all --json /root/out/seed000_new.json
