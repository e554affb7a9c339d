python3 .peers/hf_cb_peer.py /tmp/models/llama1b fixed:1:512:128 --json /tmp/peer_work/peer_b1.json
