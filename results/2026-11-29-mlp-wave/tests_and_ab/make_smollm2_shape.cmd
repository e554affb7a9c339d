python3 scripts/make_smollm2_shape.py /tmp/models
