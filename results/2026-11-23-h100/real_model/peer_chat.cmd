python3 scripts/peer_real_model.py /tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/real_results/chat_greedy.jsonl --json /tmp/real_results/peer_chat.json --save-hf /tmp/smol-hf
