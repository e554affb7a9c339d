python3 .peers/hf_cb_peer.py /tmp/models/gpt2 seed000 --json /tmp/peer_work/peer_seed000.json
