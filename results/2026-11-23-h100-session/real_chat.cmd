/work/main/bundle/roseinfer run results/2026-11-23-h100/real_model/chat_greedy.jsonl --model /tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf --device cuda -o /tmp/session_work/real_chat.jsonl
