python3 ../shared/peers/hf_cb_peer.py MODELS/llama1b nano256 --json peer_nano256.json
