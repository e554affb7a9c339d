/work/main/bundle/roseinfer run datasets/sample.jsonl --model /tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf --max-tokens 8 -o /tmp/issue12_work/real/sample_quantized.jsonl
