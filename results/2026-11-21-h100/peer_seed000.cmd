python3 ../shared/peers/hf_cb_peer.py MODELS/gpt2 seed000 --json peer_seed000.json
