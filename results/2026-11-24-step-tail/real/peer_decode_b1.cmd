python3 scripts/peer_decode_b1.py /tmp/rose-model/SmolLM2-135M-Instruct.Q4_1.gguf --json /tmp/issue12_work/real/peer_decode_b1.json
