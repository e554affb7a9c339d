/work/main/bundle/roseinfer bench --model llama-1b --device cuda --dataset-name grid:1:16:4 --batch-invariant --max-model-len 4096
