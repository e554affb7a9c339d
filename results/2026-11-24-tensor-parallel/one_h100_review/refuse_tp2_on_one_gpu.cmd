bash -c ! '/work/main/bundle/roseinfer' run datasets/sample.jsonl --model tiny --device cuda --tensor-parallel 2
