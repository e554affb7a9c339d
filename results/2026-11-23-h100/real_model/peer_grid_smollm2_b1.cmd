python3 .peers/hf_cb_peer.py /tmp/smol-hf fixed:1:512:128 --json /tmp/real_results/peer_grid_smollm2_b1.json
