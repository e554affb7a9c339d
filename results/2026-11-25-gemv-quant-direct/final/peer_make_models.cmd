python3 .peers/make_models.py /tmp/models llama1b
