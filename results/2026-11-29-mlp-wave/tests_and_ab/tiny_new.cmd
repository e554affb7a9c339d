env /work/main/bundle/roseinfer bench --device cuda --mode offline --max-num-seqs 256 --max-num-batched-tokens 16384 --dataset-name grid:1:512:128 --model tiny --json /root/out/tiny_new.json
