bash -c ! '/work/main/bundle/roseinfer' run datasets/sample.jsonl --model llama-70b --device cuda
