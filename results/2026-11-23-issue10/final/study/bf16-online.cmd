/work/main/bundle/roseinfer run /tmp/study/prompts.jsonl --model llama-1b --device cuda --dtype bf16 --mode online --num-kv-blocks 400 --max-num-batched-tokens 2048 -o /tmp/study/bf16-online.jsonl
