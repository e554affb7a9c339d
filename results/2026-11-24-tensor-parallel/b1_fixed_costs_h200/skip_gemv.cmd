env ROSEINFER_CUDA_SKIP=gemv /work/main/bundle/roseinfer bench --device cuda --model llama-8b --dataset-name grid:1:512:128 --max-num-seqs 64 --mode offline --json /tmp/b1_work/skip_gemv.json
