python3 .peers/hf_cb_peer.py /tmp/models/llama1b fixed:1:512:128 --json /tmp/decode_work/peer/peer_llama1b_b1.json
