python3 scripts/peer_decode_b1.py /tmp/models/smollm2-shape --json /root/out/status/peer_smollm2-shape_b1.json
