/work/main/bundle/roseinfer bench --model /tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf --device cuda --dataset-name grid:1:512:128 --mode offline --json /tmp/session_work/grid_smollm2_b1.json
