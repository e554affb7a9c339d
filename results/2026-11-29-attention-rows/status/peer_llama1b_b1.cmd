python3 scripts/peer_decode_b1.py /tmp/models/llama1b --json /root/out/status/peer_llama1b_b1.json
