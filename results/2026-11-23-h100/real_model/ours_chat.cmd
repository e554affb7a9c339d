/work/main/bundle/roseinfer run /tmp/real_results/chat_greedy.jsonl --model /tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf --device cuda -o /tmp/real_results/ours_chat.jsonl
