/work/main/bundle/roseinfer bench --model gpt2 --device cuda --dataset-name seed000 --mode all --both-cache-settings --json /tmp/buckets_work/seed000_all_roseinfer_1.json
