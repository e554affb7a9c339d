python3 scripts/peer_decode_b1.py /tmp/models/gpt2 --json /root/out/status/peer_gpt2_b1.json
