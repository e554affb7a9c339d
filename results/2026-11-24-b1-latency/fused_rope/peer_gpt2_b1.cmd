python3 .peers/hf_cb_peer.py /tmp/models/gpt2 fixed:1:512:128 --json /tmp/decode_work/peer/peer_gpt2_b1.json
