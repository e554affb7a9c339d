python3 .peers/hf_cb_peer.py /tmp/smol-hf nano256 --json /tmp/real_results/peer_nano256_smollm2.json
